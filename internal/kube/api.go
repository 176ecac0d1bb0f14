package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
)

// Backend is the control plane API's door to Kubernetes
// (controlapi.ControlPlane): each call reads or writes EASService objects and
// their token Secrets; the Reconciler does the rest. Client should read
// from the API server, not a cache, so that a create is seen by the next
// call.
type Backend struct {
	Client        client.Client
	Namespace     string
	MaxModelBytes int64
}

var _ controlapi.ControlPlane = (*Backend)(nil)

// TakesEffect says which of servicejson's no-effect keys do take effect
// here (server's keyEffects): the autoscaler, resources and replicas
// become Kubernetes fields.
func (b *Backend) TakesEffect(path string) bool {
	switch path {
	case "autoscaler", "metadata.cpu", "metadata.memory", "metadata.gpu", "metadata.rolling_strategy", "metadata.enable_grpc":
		return true
	}
	return false
}

func (b *Backend) key(name string) (types.NamespacedName, error) {
	res, err := ResourceName(name)
	if err != nil {
		return types.NamespacedName{}, fmt.Errorf("service %q: %w", name, service.ErrNotFound)
	}
	return types.NamespacedName{Namespace: b.Namespace, Name: res}, nil
}

func (b *Backend) get(ctx context.Context, name string) (*EASService, error) {
	key, err := b.key(name)
	if err != nil {
		return nil, err
	}
	var es EASService
	if err := b.Client.Get(ctx, key, &es); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("service %q: %w", name, service.ErrNotFound)
		}
		return nil, err
	}
	return &es, nil
}

// Create writes the token Secret, then the EASService whose spec is the
// service.json less its token.
func (b *Backend) Create(ctx context.Context, spec *servicejson.Service) (service.Info, error) {
	res, err := Validate(spec, b.MaxModelBytes)
	if err != nil {
		return service.Info{}, err
	}
	if _, err := b.get(ctx, spec.Name); err == nil {
		return service.Info{}, fmt.Errorf("service %q: %w", spec.Name, service.ErrExists)
	} else if !errors.Is(err, service.ErrNotFound) {
		return service.Info{}, err
	}
	obj, _ := ObjectName(spec.Name)
	tok := spec.Token.Reveal()
	if tok == "" {
		if tok, err = auth.GenerateToken(); err != nil {
			return service.Info{}, err
		}
	}
	sec := &corev1.Secret{
		ObjectMeta: objectMeta(spec.Name, TokenSecretName(obj), b.Namespace),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{TokenKey: []byte(tok)},
	}
	// A Secret left by an earlier delete that the garbage collector has
	// not reached yet is replaced.
	if err := b.Client.Create(ctx, sec); apierrors.IsAlreadyExists(err) {
		if err := b.Client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return service.Info{}, err
		}
		err = b.Client.Create(ctx, sec)
		if err != nil {
			return service.Info{}, fmt.Errorf("token secret: %w", err)
		}
	} else if err != nil {
		return service.Info{}, fmt.Errorf("token secret: %w", err)
	}
	body, err := StripToken(spec.Raw)
	if err != nil {
		return service.Info{}, fmt.Errorf("%w: %v", service.ErrInvalid, err)
	}
	es := &EASService{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: res, Namespace: b.Namespace,
			Annotations: map[string]string{AnnotationServiceName: spec.Name}},
		Spec: body,
	}
	if err := b.Client.Create(ctx, es); err != nil {
		// The Secret has no owner yet: take it back.
		_ = b.Client.Delete(ctx, sec)
		if apierrors.IsAlreadyExists(err) {
			return service.Info{}, fmt.Errorf("service %q: %w", spec.Name, service.ErrExists)
		}
		return service.Info{}, err
	}
	return b.info(ctx, es)
}

// Update replaces the spec: a new generation, so a new version and a
// rolling update. A token in the service.json replaces the Secret's.
func (b *Backend) Update(ctx context.Context, name string, spec *servicejson.Service) (service.Info, error) {
	if spec.Name != name {
		return service.Info{}, fmt.Errorf("%w: name: the service.json names %q but the request is for %q; a service cannot be renamed (create the new one, then delete the old)", service.ErrInvalid, spec.Name, name)
	}
	if _, err := Validate(spec, b.MaxModelBytes); err != nil {
		return service.Info{}, err
	}
	es, err := b.get(ctx, name)
	if err != nil {
		return service.Info{}, err
	}
	body, err := StripToken(spec.Raw)
	if err != nil {
		return service.Info{}, fmt.Errorf("%w: %v", service.ErrInvalid, err)
	}
	if !spec.Token.IsZero() {
		if err := b.setToken(ctx, es, spec.Token.Reveal()); err != nil {
			return service.Info{}, err
		}
	}
	es.Spec = body
	if err := b.Client.Update(ctx, es); err != nil {
		if apierrors.IsConflict(err) {
			return service.Info{}, fmt.Errorf("service %q changed while being modified; try again: %w", name, service.ErrBusy)
		}
		return service.Info{}, err
	}
	return b.info(ctx, es)
}

func (b *Backend) setToken(ctx context.Context, es *EASService, tok string) error {
	var sec corev1.Secret
	obj := es.objectName()
	if err := b.Client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: TokenSecretName(obj)}, &sec); err != nil {
		return fmt.Errorf("token secret: %w", err)
	}
	setToken(&sec, tok)
	return b.Client.Update(ctx, &sec)
}

// Describe is one service's snapshot.
func (b *Backend) Describe(ctx context.Context, name string) (service.Info, error) {
	es, err := b.get(ctx, name)
	if err != nil {
		return service.Info{}, err
	}
	return b.info(ctx, es)
}

// List is every service in the namespace.
func (b *Backend) List(ctx context.Context) ([]service.Info, error) {
	var list EASServiceList
	if err := b.Client.List(ctx, &list, client.InNamespace(b.Namespace)); err != nil {
		return nil, err
	}
	out := make([]service.Info, 0, len(list.Items))
	for i := range list.Items {
		in, err := b.info(ctx, &list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b service.Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Start removes the stopped annotation: the Deployment goes back to
// metadata.instance replicas.
func (b *Backend) Start(ctx context.Context, name string) (service.Info, error) {
	return b.setStopped(ctx, name, false)
}

// Stop scales the service to 0: the pods drain and end; the objects stay.
func (b *Backend) Stop(ctx context.Context, name string) (service.Info, error) {
	return b.setStopped(ctx, name, true)
}

func (b *Backend) setStopped(ctx context.Context, name string, stopped bool) (service.Info, error) {
	es, err := b.get(ctx, name)
	if err != nil {
		return service.Info{}, err
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationStopped: nil}}}
	if stopped {
		patch = map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnotationStopped: "true"}}}
	}
	data, _ := json.Marshal(patch)
	if err := b.Client.Patch(ctx, es, client.RawPatch(types.MergePatchType, data)); err != nil {
		return service.Info{}, err
	}
	return b.info(ctx, es)
}

// Delete removes the EASService; the garbage collector removes every
// object it owns (ownerReferences), and the pods drain as they stop.
func (b *Backend) Delete(ctx context.Context, name string) error {
	es, err := b.get(ctx, name)
	if err != nil {
		return err
	}
	err = b.Client.Delete(ctx, es, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("service %q: %w", name, service.ErrNotFound)
	}
	return err
}

// SwitchVersion makes a stored version's service.json the spec again: on
// Kubernetes that is a new generation (a new version number) with the old
// content, rolled out like any modify.
func (b *Backend) SwitchVersion(ctx context.Context, name string, v int) (service.Info, error) {
	es, err := b.get(ctx, name)
	if err != nil {
		return service.Info{}, err
	}
	var cm corev1.ConfigMap
	if err := b.Client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: ConfigMapName(es.objectName(), int64(v))}, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return service.Info{}, fmt.Errorf("service %q has no version %d (see its versions list): %w", name, v, service.ErrInvalid)
		}
		return service.Info{}, err
	}
	es.Spec = json.RawMessage(cm.Data[ConfigFile])
	if err := b.Client.Update(ctx, es); err != nil {
		return service.Info{}, err
	}
	return b.info(ctx, es)
}

// Events are the Kubernetes events of the service's objects: the
// EASService, its Deployment, ReplicaSets, pods and HPA, oldest first.
func (b *Backend) Events(ctx context.Context, name string) ([]controlapi.EventObject, error) {
	es, err := b.get(ctx, name)
	if err != nil {
		return nil, err
	}
	obj := es.objectName()
	mine := map[string]bool{Kind + "/" + es.Name: true, "Deployment/" + obj: true, "HorizontalPodAutoscaler/" + obj: true}
	var rs appsv1.ReplicaSetList
	if err := b.Client.List(ctx, &rs, client.InNamespace(es.Namespace), client.MatchingLabels(selectorLabels(obj))); err != nil {
		return nil, err
	}
	for _, r := range rs.Items {
		mine["ReplicaSet/"+r.Name] = true
	}
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods, client.InNamespace(es.Namespace), client.MatchingLabels(selectorLabels(obj))); err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		mine["Pod/"+p.Name] = true
	}
	var evs corev1.EventList
	if err := b.Client.List(ctx, &evs, client.InNamespace(es.Namespace)); err != nil {
		return nil, err
	}
	out := []controlapi.EventObject{}
	for _, e := range evs.Items {
		if !mine[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] {
			continue
		}
		out = append(out, controlapi.EventObject{Time: eventTime(e), Type: e.Type, Reason: e.Reason,
			Message: e.InvolvedObject.Kind + " " + e.InvolvedObject.Name + ": " + e.Message})
	}
	slices.SortStableFunc(out, func(a, b controlapi.EventObject) int { return a.Time.Compare(b.Time) })
	return out, nil
}

func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// Instances are the service's pods.
func (b *Backend) Instances(ctx context.Context, name string) ([]controlapi.InstanceObject, error) {
	es, err := b.get(ctx, name)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods, client.InNamespace(es.Namespace), client.MatchingLabels(selectorLabels(es.objectName()))); err != nil {
		return nil, err
	}
	out := []controlapi.InstanceObject{}
	for _, p := range pods.Items {
		v, _ := strconv.Atoi(p.Labels[LabelVersion])
		in := controlapi.InstanceObject{InstanceName: p.Name, Status: podStatus(p), Version: v, HostIP: p.Status.HostIP, InstanceIP: p.Status.PodIP}
		if p.Status.StartTime != nil {
			in.StartTime = p.Status.StartTime.Time
		}
		for _, cs := range p.Status.ContainerStatuses {
			in.Restarts += int(cs.RestartCount)
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b controlapi.InstanceObject) int { return strings.Compare(a.InstanceName, b.InstanceName) })
	return out, nil
}

// podStatus is a pod in one word: Running (ready), Terminating, the
// reason a container waits, or the phase.
func podStatus(p corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return w.Reason
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return "Running"
			}
			if p.Status.Phase == corev1.PodRunning {
				return "NotReady"
			}
		}
	}
	return string(p.Status.Phase)
}

// Versions are the stored versions (ConfigMaps), oldest first.
func (b *Backend) Versions(ctx context.Context, name string) (controlapi.VersionList, error) {
	es, err := b.get(ctx, name)
	if err != nil {
		return controlapi.VersionList{}, err
	}
	list, err := versionConfigMaps(ctx, b.Client, es.Namespace, es.objectName())
	if err != nil {
		return controlapi.VersionList{}, err
	}
	out := controlapi.VersionList{ServiceName: name, CurrentVersion: int(es.Status.CurrentVersion), LatestVersion: int(es.Generation), Versions: []controlapi.VersionObject{}}
	for _, cm := range list {
		v, _ := strconv.Atoi(cm.Labels[LabelVersion])
		out.Versions = append(out.Versions, controlapi.NewVersionObject(service.VersionInfo{
			Version: v, CreateTime: cm.CreationTimestamp.Time, Current: int64(v) == es.Status.CurrentVersion, Config: []byte(cm.Data[ConfigFile]),
		}))
	}
	return out, nil
}

// info is the service's snapshot from its EASService and token Secret.
func (b *Backend) info(ctx context.Context, es *EASService) (service.Info, error) {
	name := es.Annotations[AnnotationServiceName]
	if name == "" {
		name = strings.ReplaceAll(es.Name, "-", "_")
	}
	in := service.Info{
		Name:            name,
		Status:          service.Status(es.Status.Status),
		Message:         es.Status.Message,
		Reason:          es.Status.Reason,
		CreateTime:      es.CreationTimestamp.Time,
		UpdateTime:      es.CreationTimestamp.Time,
		CurrentVersion:  int(es.Status.CurrentVersion),
		LatestVersion:   int(es.Generation),
		RunningInstance: int(es.Status.ReadyReplicas),
		TotalInstance:   int(es.Status.Replicas),
	}
	for _, c := range es.Status.Conditions {
		if c.LastTransitionTime.After(in.UpdateTime) {
			in.UpdateTime = c.LastTransitionTime.Time
		}
	}
	if cfg, err := StripToken(es.Spec); err == nil {
		in.Config = cfg
	}
	settled := es.Status.ObservedGeneration == es.Generation &&
		(in.Status == StatusRunning || in.Status == StatusStopped || in.Status == StatusFailed || in.Status == StatusWaiting)
	if !settled {
		in.PendingVersion = int(es.Generation)
		if in.Status == "" || in.Status == StatusRunning || in.Status == StatusStopped || es.Status.ObservedGeneration != es.Generation {
			in.Status = StatusCreating
			if es.Status.CurrentVersion != 0 {
				in.Status = StatusUpdating
			}
		}
	}
	// Until the loop has run after a stop or start, say where the
	// service is heading.
	stopWanted := es.Annotations[AnnotationStopped] == "true"
	switch {
	case stopWanted:
		in.PendingVersion = 0
		if in.Status != StatusStopped {
			in.Status = StatusStopping
		}
	case in.Status == StatusStopped || in.Status == StatusStopping:
		in.Status, in.PendingVersion = StatusCreating, int(es.Generation)
		if es.Status.CurrentVersion != 0 {
			in.Status = StatusUpdating
		}
	}
	var sec corev1.Secret
	err := b.Client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: TokenSecretName(es.objectName())}, &sec)
	switch {
	case err == nil:
		in.Token = string(sec.Data[TokenKey])
	case !apierrors.IsNotFound(err):
		return in, err
	}
	return in, nil
}
