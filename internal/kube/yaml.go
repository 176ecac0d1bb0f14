package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/servicejson"
)

// RenderStandalone is every object of spec for kubectl apply without the
// controller (eas-server k8s render): the token Secret (the service.json's
// token, else a generated one), the ConfigMap of version 1, the
// Deployment, the Service and the HPA, with no owner.
func RenderStandalone(spec *servicejson.Service, opt Options) ([]any, error) {
	objs, err := Render(spec, 1, int32(spec.Metadata.Instance), opt)
	if err != nil {
		return nil, err
	}
	tok := spec.Token.Reveal()
	if tok == "" {
		if tok, err = auth.GenerateToken(); err != nil {
			return nil, err
		}
	}
	sec := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: objectMeta(spec.Name, TokenSecretName(objs.Deployment.Name), opt.Namespace),
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{TokenKey: tok},
	}
	out := []any{sec, objs.ConfigMap, objs.Service, objs.Deployment}
	if objs.HPA != nil {
		out = append(out, objs.HPA)
	}
	return out, nil
}

// RenderEASService is the EASService of spec for kubectl apply with the
// controller running: its spec is the service.json, token included when
// the file has one (the controller moves it to the Secret).
func RenderEASService(spec *servicejson.Service, namespace string) (*EASService, error) {
	res, err := ResourceName(spec.Name)
	if err != nil {
		return nil, err
	}
	var body json.RawMessage
	if err := json.Unmarshal(spec.Raw, &body); err != nil {
		return nil, err
	}
	return &EASService{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: res, Namespace: namespace, Annotations: map[string]string{AnnotationServiceName: spec.Name}},
		Spec:       body,
	}, nil
}

// WriteYAML writes objects as one YAML stream, without the fields the API
// server fills (status, creationTimestamp).
func WriteYAML(w io.Writer, objects ...any) error {
	var buf bytes.Buffer
	for _, o := range objects {
		js, err := json.Marshal(o)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			return err
		}
		delete(m, "status")
		scrubCreationTimestamps(m)
		y, err := yaml.Marshal(m)
		if err != nil {
			return fmt.Errorf("yaml: %w", err)
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// scrubCreationTimestamps drops every null creationTimestamp: the
// object's own and its templates' (a Deployment's pod template).
func scrubCreationTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		if ts, ok := t["creationTimestamp"]; ok && ts == nil {
			delete(t, "creationTimestamp")
		}
		for _, c := range t {
			scrubCreationTimestamps(c)
		}
	case []any:
		for _, c := range t {
			scrubCreationTimestamps(c)
		}
	}
}
