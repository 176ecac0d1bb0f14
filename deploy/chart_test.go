package deploy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/eas-server/eas-server/deploy"
	"github.com/eas-server/eas-server/internal/kube/kubetest"
	"github.com/eas-server/eas-server/internal/require"
)

// chartDir is the chart, relative to this package's folder.
const chartDir = "helm/eas-server"

var cluster *kubetest.Cluster

func TestMain(m *testing.M) {
	crd, err := deploy.CRDFile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kubetest.Main(m, &cluster, crd)
}

// helmBin returns the helm binary: $EAS_HELM, else helm in the Kubernetes
// tools directory (scripts/build-k8s-tools.sh installs it there). A missing
// one skips the test, or fails it with EAS_REQUIRE_K8S=1.
func helmBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("EAS_HELM")
	if p == "" {
		dir, _ := kubetest.ToolsDir() // the folder, even when tools other than helm are missing there
		p = filepath.Join(dir, "helm")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		require.Missing(t, require.K8s, "no helm binary at %s: run scripts/build-k8s-tools.sh or set EAS_HELM", p)
	}
	return p
}

// helm runs the helm binary with its own empty config, cache and data
// directories and the test cluster's kubeconfig, and returns its stdout.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+cluster.Kubeconfig,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// valueSets are the values the chart is rendered and checked with.
var valueSets = []struct {
	name   string
	values string // a values file
}{
	{"defaults", ""},
	{"gateway-ingress", `
gateway:
  enabled: true
  ingress:
    enabled: true
    className: nginx
    host: eas.example.com
    annotations:
      nginx.ingress.kubernetes.io/proxy-body-size: 64m
    tls:
      - secretName: eas-tls
        hosts: [eas.example.com]
`},
	{"cache-oss", `
cachePVC: model-cache
ossSecret: oss-credentials
queueBroker: nats://nats:4222
adminToken: chosen-admin-token
shutdownGrace: 45s
serviceImage:
  repository: registry.example.com/eas-server-torch
  tag: 0.1.0-torch
  pullPolicy: Always
controller:
  nodeSelector:
    kubernetes.io/os: linux
  tolerations:
    - key: dedicated
      operator: Equal
      value: eas
      effect: NoSchedule
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - key: kubernetes.io/arch
                operator: In
                values: [amd64]
`},
	{"no-gateway-existing-secret", `
gateway:
  enabled: false
existingAdminTokenSecret: my-admin-token
serviceAccount:
  create: true
  controllerName: eas-ctl
`},
}

// render renders the chart as release "eas" in namespace ns with the given
// values file content, plus extra helm arguments.
func render(t *testing.T, ns, values string, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "eas", chartDir, "--namespace", ns}
	if values != "" {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", f)
	}
	args = append(args, extra...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// decode splits a multi-document YAML stream into objects, dropping empty
// documents.
func decode(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding the rendered chart: %v\n%s", err, stream)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatalf("the chart rendered no objects:\n%s", stream)
	}
	return objs
}

func TestHelmLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			args := []string{"lint", chartDir, "--strict", "--namespace", "eas"}
			if vs.values != "" {
				f := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(f, []byte(vs.values), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--values", f)
			}
			if _, err := helm(t, args...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestChartServerDryRun creates every object the chart renders, with each
// value set, by a server-side dry run in a fresh namespace of a real API
// server that has the CRD: the API server's validation and admission refuse
// what a real install would have refused.
func TestChartServerDryRun(t *testing.T) {
	cluster.Need(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			ns := cluster.Namespace(t)
			objs := render(t, ns, vs.values)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Errorf("%s %s: %v", gvk, o.GetName(), err)
					continue
				}
				var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
				if mapping.Scope.Name() == "namespace" {
					if got := o.GetNamespace(); got != ns {
						t.Errorf("%s %s: namespace %q, want the release's %q", gvk.Kind, o.GetName(), got, ns)
					}
					ri = dyn.Resource(mapping.Resource).Namespace(ns)
				}
				_, err = ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
				if err != nil {
					t.Errorf("%s %s refused: %v", gvk.Kind, o.GetName(), err)
				}
			}
		})
	}
}

// kinds counts the rendered objects by kind.
func kinds(objs []*unstructured.Unstructured) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	return n
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered (have %v)", kind, name, kinds(objs))
	return nil
}

func convert[T any](t *testing.T, o *unstructured.Unstructured) *T {
	t.Helper()
	v := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return v
}

// grant is one (API group, resource, verb) a Role allows.
type grant struct{ group, resource, verb string }

func grantsOf(rules []map[string]any) map[grant]bool {
	g := map[grant]bool{}
	for _, r := range rules {
		for _, grp := range strs(r["apiGroups"]) {
			for _, res := range strs(r["resources"]) {
				for _, v := range strs(r["verbs"]) {
					g[grant{grp, res, v}] = true
				}
			}
		}
	}
	return g
}

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func grants(groups, resources, verbs []string) map[grant]bool {
	g := map[grant]bool{}
	for _, grp := range groups {
		for _, res := range resources {
			for _, v := range verbs {
				g[grant{grp, res, v}] = true
			}
		}
	}
	return g
}

func union(ms ...map[grant]bool) map[grant]bool {
	u := map[grant]bool{}
	for _, m := range ms {
		for k := range m {
			u[k] = true
		}
	}
	return u
}

// TestRBACLeastPrivilege checks that the chart grants nothing cluster-wide,
// no wildcard, and exactly the rules the controller and the gateway need.
func TestRBACLeastPrivilege(t *testing.T) {
	const ns = "eas-rbac"
	objs := render(t, ns, "")
	crud := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	read := []string{"get", "list", "watch"}
	want := map[string]map[grant]bool{
		"eas-eas-server-controller": union(
			grants([]string{""}, []string{"configmaps", "secrets", "services"}, crud),
			grants([]string{"apps"}, []string{"deployments"}, crud),
			grants([]string{"autoscaling"}, []string{"horizontalpodautoscalers"}, crud),
			grants([]string{""}, []string{"pods"}, read),
			grants([]string{"apps"}, []string{"replicasets"}, read),
			grants([]string{"", "events.k8s.io"}, []string{"events"}, []string{"get", "list", "watch", "create", "patch"}),
			grants([]string{"eas-server.io"}, []string{"easservices"}, crud),
			grants([]string{"eas-server.io"}, []string{"easservices/status"}, []string{"get", "update", "patch"}),
		),
		"eas-eas-server-gateway": grants([]string{""}, []string{"services"}, read),
	}
	roles := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			t.Errorf("%s %s: the chart must grant nothing cluster-wide", o.GetKind(), o.GetName())
		case "RoleBinding":
			if o.GetNamespace() != ns {
				t.Errorf("RoleBinding %s in namespace %q, want %q", o.GetName(), o.GetNamespace(), ns)
			}
			if kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind"); kind != "Role" {
				t.Errorf("RoleBinding %s binds a %s, want a Role", o.GetName(), kind)
			}
		case "Role":
			roles++
			if o.GetNamespace() != ns {
				t.Errorf("Role %s in namespace %q, want %q", o.GetName(), o.GetNamespace(), ns)
			}
			raw, _, _ := unstructured.NestedSlice(o.Object, "rules")
			var rules []map[string]any
			for _, r := range raw {
				m, _ := r.(map[string]any)
				rules = append(rules, m)
				for _, key := range []string{"apiGroups", "resources", "verbs", "resourceNames"} {
					if slices.Contains(strs(m[key]), "*") {
						t.Errorf("Role %s: %s contains \"*\": %v", o.GetName(), key, m)
					}
				}
				if _, ok := m["nonResourceURLs"]; ok {
					t.Errorf("Role %s: nonResourceURLs in a rule: %v", o.GetName(), m)
				}
			}
			w, ok := want[o.GetName()]
			if !ok {
				t.Errorf("unexpected Role %s", o.GetName())
				continue
			}
			got := grantsOf(rules)
			for g := range got {
				if !w[g] {
					t.Errorf("Role %s grants %q %q %q, which is not needed", o.GetName(), g.group, g.resource, g.verb)
				}
			}
			for g := range w {
				if !got[g] {
					t.Errorf("Role %s lacks %q %q %q", o.GetName(), g.group, g.resource, g.verb)
				}
			}
		}
	}
	if roles != len(want) {
		t.Errorf("%d Roles rendered, want %d", roles, len(want))
	}
}

// TestControllerArgs checks that the values reach the controller's command
// line and environment, and the gateway's presence.
func TestControllerArgs(t *testing.T) {
	const ns = "eas-args"
	t.Run("defaults", func(t *testing.T) {
		objs := render(t, ns, "")
		d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", "eas-eas-server-controller"))
		pod := d.Spec.Template.Spec
		if len(pod.Containers) != 1 {
			t.Fatalf("%d containers", len(pod.Containers))
		}
		c := pod.Containers[0]
		for _, a := range []string{"controller", "--namespace=" + ns, "--image=eas-server:0.1.0", "--image-pull-policy=IfNotPresent", "--shutdown-grace=30s", "--log-format=json", "--listen=:8080"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("controller args %q lack %q", c.Args, a)
			}
		}
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--cache-pvc") || strings.HasPrefix(a, "--oss-secret") || strings.HasPrefix(a, "--queue-broker") {
				t.Errorf("controller args %q: %s without its value set", c.Args, a)
			}
		}
		if c.Image != "eas-server:0.1.0" {
			t.Errorf("controller image %q", c.Image)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		if r := env["EAS_ADMIN_TOKEN"].ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Name != "eas-eas-server-admin-token" || r.SecretKeyRef.Key != "token" {
			t.Errorf("EAS_ADMIN_TOKEN: %+v", env["EAS_ADMIN_TOKEN"])
		}
		if r := env["POD_NAMESPACE"].ValueFrom; r == nil || r.FieldRef == nil || r.FieldRef.FieldPath != "metadata.namespace" {
			t.Errorf("POD_NAMESPACE: %+v", env["POD_NAMESPACE"])
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("readiness probe %+v", c.ReadinessProbe)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("liveness probe %+v", c.LivenessProbe)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("controller securityContext %+v", sc)
		}
		secret := convert[corev1.Secret](t, find(t, objs, "Secret", "eas-eas-server-admin-token"))
		if len(secret.Data["token"]) < 32 {
			t.Errorf("generated admin token %q: want 32 characters", secret.Data["token"])
		}
		find(t, objs, "Deployment", "eas-eas-server-gateway")
		find(t, objs, "Service", "eas-eas-server-gateway")
		if n := kinds(objs)["Ingress"]; n != 0 {
			t.Errorf("%d Ingresses rendered by default", n)
		}
	})
	t.Run("cache-oss", func(t *testing.T) {
		objs := render(t, ns, valueSets[2].values)
		d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", "eas-eas-server-controller"))
		c := d.Spec.Template.Spec.Containers[0]
		for _, a := range []string{"--cache-pvc=model-cache", "--oss-secret=oss-credentials", "--queue-broker=nats://nats:4222", "--shutdown-grace=45s",
			"--image=registry.example.com/eas-server-torch:0.1.0-torch", "--image-pull-policy=Always"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("controller args %q lack %q", c.Args, a)
			}
		}
		if c.Image != "eas-server:0.1.0" {
			t.Errorf("controller image %q: serviceImage must not change it", c.Image)
		}
		secret := convert[corev1.Secret](t, find(t, objs, "Secret", "eas-eas-server-admin-token"))
		if string(secret.Data["token"]) != "chosen-admin-token" {
			t.Errorf("admin token %q, want adminToken's", secret.Data["token"])
		}
		if ns := d.Spec.Template.Spec.NodeSelector; ns["kubernetes.io/os"] != "linux" {
			t.Errorf("nodeSelector %v", ns)
		}
	})
	t.Run("no-gateway-existing-secret", func(t *testing.T) {
		objs := render(t, ns, valueSets[3].values)
		for _, o := range objs {
			if strings.Contains(o.GetName(), "gateway") {
				t.Errorf("%s %s rendered with gateway.enabled false", o.GetKind(), o.GetName())
			}
			if o.GetKind() == "Secret" {
				t.Errorf("Secret %s rendered with existingAdminTokenSecret set", o.GetName())
			}
		}
		d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", "eas-eas-server-controller"))
		if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "eas-ctl" {
			t.Errorf("serviceAccountName %q, want eas-ctl", sa)
		}
		find(t, objs, "ServiceAccount", "eas-ctl")
		c := d.Spec.Template.Spec.Containers[0]
		for _, e := range c.Env {
			if e.Name == "EAS_ADMIN_TOKEN" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "my-admin-token") {
				t.Errorf("EAS_ADMIN_TOKEN %+v, want from Secret my-admin-token", e)
			}
		}
	})
}

// TestAdminTokenKeptAcrossUpgrades renders against the cluster (helm's
// server dry run runs lookup) after the admin token Secret exists: the
// token must be the one the cluster has, not a new random one.
func TestAdminTokenKeptAcrossUpgrades(t *testing.T) {
	ns := cluster.Namespace(t)
	const token = "the-token-of-the-first-install"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "eas-eas-server-admin-token"},
		Data:       map[string][]byte{"token": []byte(token)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		objs := render(t, ns, "", "--dry-run=server")
		secret := convert[corev1.Secret](t, find(t, objs, "Secret", "eas-eas-server-admin-token"))
		if got := string(secret.Data["token"]); got != token {
			t.Fatalf("admin token %q (base64 %s), want the existing %q", got, base64.StdEncoding.EncodeToString(secret.Data["token"]), token)
		}
	}
}

// TestCRD checks the embedded CRD against what the controller relies on and
// that the API server serves it.
func TestCRD(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(deploy.CRD(), &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Name != "easservices.eas-server.io" || crd.Spec.Group != "eas-server.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("CRD %s group %s scope %s", crd.Name, crd.Spec.Group, crd.Spec.Scope)
	}
	n := crd.Spec.Names
	if n.Kind != "EASService" || n.Plural != "easservices" || n.Singular != "easservice" || !slices.Equal(n.ShortNames, []string{"eas"}) {
		t.Errorf("names %+v", n)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1alpha1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s served %v storage %v subresources %+v", v.Name, v.Served, v.Storage, v.Subresources)
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+"="+c.JSONPath)
	}
	wantCols := []string{"Status=.status.status", "Ready=.status.readyReplicas", "Replicas=.status.replicas",
		"Version=.status.currentVersion", "Age=.metadata.creationTimestamp"}
	if !slices.Equal(cols, wantCols) {
		t.Errorf("printer columns %q, want %q", cols, wantCols)
	}
	props := v.Schema.OpenAPIV3Schema.Properties
	for _, p := range []string{"spec", "status"} {
		s := props[p]
		if s.Type != "object" || s.XPreserveUnknownFields == nil || !*s.XPreserveUnknownFields {
			t.Errorf("%s: type %q preserve-unknown-fields %v", p, s.Type, s.XPreserveUnknownFields)
		}
	}
	abs, err := deploy.CRDFile()
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, deploy.CRD()) || !strings.HasSuffix(filepath.ToSlash(abs), deploy.CRDPath) {
		t.Errorf("CRDFile %s differs from the embedded CRD", abs)
	}

	// The API server serves it: an EASService with a free-form spec and a
	// status is accepted (dry run).
	cluster.Need(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := cluster.Namespace(t)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eas-server.io/v1alpha1",
		"kind":       "EASService",
		"metadata":   map[string]any{"name": "echo"},
		"spec": map[string]any{
			"name":      "echo",
			"processor": "echo",
			"metadata":  map[string]any{"instance": int64(1), "rpc": map[string]any{"batching": true}},
		},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: n.Plural}
	got, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("creating an EASService: %v", err)
	}
	if batching, _, _ := unstructured.NestedBool(got.Object, "spec", "metadata", "rpc", "batching"); !batching {
		t.Errorf("the spec lost its unknown fields: %v", got.Object["spec"])
	}
}
