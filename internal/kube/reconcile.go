package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/service"
	"github.com/eas-server/eas-server/servicejson"
)

// fieldOwner is the server-side apply manager of the objects the
// controller writes.
const fieldOwner = client.FieldOwner("eas-server")

// keepVersions is how many version ConfigMaps a service keeps besides the
// current one (the versions list, and what SwitchVersion can go back to).
const keepVersions = 10

// The status words, as EAS names them.
const (
	StatusCreating = "Creating"
	StatusRunning  = "Running"
	StatusUpdating = "Updating"
	StatusWaiting  = "Waiting"
	StatusFailed   = "Failed"
	StatusStopping = "Stopping"
	StatusStopped  = "Stopped"
)

// Reconciler is the one loop behind both doors (the API and kubectl): it
// makes a service's objects match its EASService and writes the status
// back. Every write is idempotent (server-side apply, create-if-missing),
// so a restarted controller changes nothing that is already right.
type Reconciler struct {
	Client        client.Client
	Options       Options
	Recorder      events.EventRecorder // nil = no events
	Log           *slog.Logger
	MaxModelBytes int64

	completed atomic.Int64 // Reconcile calls that returned no error; see Completed
}

// Completed is how many Reconcile calls have returned without an error. A
// pass over objects that are already right writes nothing, so this count
// is the only sign that such a pass has run: a test of a restarted
// controller waits on it before it checks that nothing changed. Safe for
// concurrent use.
func (r *Reconciler) Completed() int64 { return r.completed.Load() }

// SetupWithManager registers the loop: EASServices, the objects they own,
// and their pods (owned by ReplicaSets, so mapped by label).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	podToService := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[LabelService]
		if !ok || o.GetLabels()[LabelManagedBy] != ManagedBy {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("easservice").
		For(&EASService{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}). // a new token rolls the pods
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Watches(&corev1.Pod{}, podToService).
		Complete(r)
}

// ParseSpec reads an EASService's spec as a service.json and checks what
// Kubernetes adds: the name must match the object's (or be absent) and be
// usable in object names, and the processor must accept the config
// (service.Precheck).
func ParseSpec(es *EASService, maxModelBytes int64) (*servicejson.Service, error) {
	raw := es.Spec
	if len(raw) == 0 {
		return nil, errors.New("spec: empty; the spec is a service.json object")
	}
	// A kubectl user need not repeat the name: take metadata.name.
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) == nil && top != nil && top["name"] == nil {
		top["name"], _ = json.Marshal(strings.ReplaceAll(es.Name, "-", "_"))
		raw, _ = json.Marshal(top)
	}
	spec, err := servicejson.Parse(raw)
	if err != nil {
		return nil, err
	}
	want, err := Validate(spec, maxModelBytes)
	if err != nil {
		return nil, err
	}
	if want != es.Name {
		return nil, fmt.Errorf("name: %q belongs in an EASService named %q, not %q; rename one of them", spec.Name, want, es.Name)
	}
	return spec, nil
}

// Validate checks a parsed service.json the way both doors must before
// anything is written: its name must make Kubernetes names (it returns
// the EASService's), what only Kubernetes cannot run is refused, and the
// processor must accept the config (service.Precheck). Errors wrap
// service.ErrInvalid.
func Validate(spec *servicejson.Service, maxModelBytes int64) (string, error) {
	res, err := ResourceName(spec.Name)
	if err != nil {
		return "", fmt.Errorf("%w: %v", service.ErrInvalid, err)
	}
	if a := spec.Autoscaler; a != nil && spec.Metadata.CPU == 0 {
		if _, ok := a.Strategy(servicejson.MetricCPU); ok || len(a.Strategies) == 0 {
			return "", fmt.Errorf(`%w: autoscaler: scaling on cpu (given, or the HPA's default when no strategy is) needs metadata.cpu: the HPA measures use as a percent of the pods' CPU request; set "metadata": {"cpu": N} or scale on qps`, service.ErrInvalid)
		}
	}
	if err := service.Precheck(spec, maxModelBytes); err != nil {
		return "", err
	}
	return res, nil
}

// Reconcile makes one service right.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err == nil {
		r.completed.Add(1)
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var es EASService
	if err := r.Client.Get(ctx, req.NamespacedName, &es); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !es.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil // owner references let the garbage collector remove the rest
	}
	st := es.DeepCopy().Status // SetStatusCondition edits in place
	st.ObservedGeneration = es.Generation
	spec, err := ParseSpec(&es, r.MaxModelBytes)
	if err != nil {
		// Nothing is written for a spec that cannot run: the version
		// that serves, if any, keeps serving.
		st.Status, st.Reason, st.Message = StatusFailed, "InvalidSpec", err.Error()
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: "SpecValid", Status: metav1.ConditionFalse, Reason: "InvalidSpec", Message: capMessage(err.Error()), ObservedGeneration: es.Generation})
		return reconcile.Result{}, r.writeStatus(ctx, &es, st)
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: "SpecValid", Status: metav1.ConditionTrue, Reason: "Valid", ObservedGeneration: es.Generation})
	obj := es.objectName()
	tokenGeneration, err := r.ensureToken(ctx, &es, spec, obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	var dep appsv1.Deployment
	depErr := r.Client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: obj}, &dep)
	if depErr != nil && !apierrors.IsNotFound(depErr) {
		return reconcile.Result{}, depErr
	}
	exists := depErr == nil
	replicas := int32(spec.Metadata.Instance)
	switch {
	case es.Annotations[AnnotationStopped] == "true":
		replicas = 0
	case spec.Autoscaler != nil && exists && dep.Spec.Replicas != nil && *dep.Spec.Replicas > 0:
		replicas = *dep.Spec.Replicas // the HPA's count stands
	}
	opt := r.Options
	opt.Namespace = es.Namespace
	objs, err := Render(spec, es.Generation, replicas, opt)
	if err != nil {
		st.Status, st.Reason, st.Message = StatusFailed, "RenderFailed", err.Error()
		return reconcile.Result{}, r.writeStatus(ctx, &es, st)
	}
	objs.Deployment.Spec.Template.Annotations[annotationTokenGeneration] = tokenGeneration
	if err := r.createConfigMap(ctx, &es, objs.ConfigMap); err != nil {
		return reconcile.Result{}, err
	}
	for _, o := range []client.Object{objs.Service, objs.Deployment} {
		if err := r.apply(ctx, &es, o); err != nil {
			return reconcile.Result{}, err
		}
	}
	if objs.HPA != nil {
		if err := r.apply(ctx, &es, objs.HPA); err != nil {
			return reconcile.Result{}, err
		}
	} else {
		h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: es.Namespace, Name: obj}}
		if err := r.Client.Delete(ctx, h); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.pruneVersions(ctx, &es, obj); err != nil {
		r.Log.Warn("pruning old versions", "service", spec.Name, "err", err)
	}
	pods, err := r.pods(ctx, es.Namespace, obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	status(&st, &es, objs.Deployment, pods, replicas) // the apply's answer: the Deployment as it is now
	return reconcile.Result{}, r.writeStatus(ctx, &es, st)
}

// ensureToken makes the token Secret exist and be owned by es: the token
// of the spec when it gives one, else the one there (the API writes it
// before the EASService), else a generated one. It returns the Secret's
// token generation, a counter bumped whenever the token changes, which the
// pod template carries so that a new token rolls the pods (the token
// itself, or anything derived from it, never leaves the Secret).
func (r *Reconciler) ensureToken(ctx context.Context, es *EASService, spec *servicejson.Service, obj string) (string, error) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: es.Namespace, Name: TokenSecretName(obj)}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, sec, func() error {
		m := objectMeta(spec.Name, sec.Name, es.Namespace)
		if sec.Labels == nil {
			sec.Labels = map[string]string{}
		}
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		maps.Copy(sec.Labels, m.Labels)
		maps.Copy(sec.Annotations, m.Annotations)
		sec.Type = corev1.SecretTypeOpaque
		switch {
		case !spec.Token.IsZero():
			setToken(sec, spec.Token.Reveal())
		case len(sec.Data[TokenKey]) == 0:
			tok, err := auth.GenerateToken()
			if err != nil {
				return err
			}
			setToken(sec, tok)
		}
		if sec.Annotations[annotationTokenGeneration] == "" {
			sec.Annotations[annotationTokenGeneration] = "1"
		}
		return controllerutil.SetControllerReference(es, sec, r.Client.Scheme())
	})
	if err != nil {
		return "", fmt.Errorf("token secret %s: %w", sec.Name, err)
	}
	return sec.Annotations[annotationTokenGeneration], nil
}

// setToken puts tok in the Secret, bumping its token generation when it
// changes the token.
func setToken(sec *corev1.Secret, tok string) {
	if string(sec.Data[TokenKey]) == tok {
		return
	}
	had := len(sec.Data[TokenKey]) > 0
	sec.Data = map[string][]byte{TokenKey: []byte(tok)}
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	gen, _ := strconv.Atoi(sec.Annotations[annotationTokenGeneration])
	if had || gen == 0 {
		gen++
	}
	sec.Annotations[annotationTokenGeneration] = strconv.Itoa(gen)
}

// createConfigMap writes a version's ConfigMap once: a version never
// changes, so an existing one is left as it is.
func (r *Reconciler) createConfigMap(ctx context.Context, es *EASService, cm *corev1.ConfigMap) error {
	if err := controllerutil.SetOwnerReference(es, cm, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// apply writes o by server-side apply, owned by es.
func (r *Reconciler) apply(ctx context.Context, es *EASService, o client.Object) error {
	if err := controllerutil.SetControllerReference(es, o, r.Client.Scheme()); err != nil {
		return err
	}
	//nolint:staticcheck // typed objects: the apply-configuration form needs generated code.
	if err := r.Client.Patch(ctx, o, client.Apply, fieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	return nil
}

// pruneVersions deletes version ConfigMaps beyond the newest keepVersions
// (the current one is always kept).
func (r *Reconciler) pruneVersions(ctx context.Context, es *EASService, obj string) error {
	list, err := versionConfigMaps(ctx, r.Client, es.Namespace, obj)
	if err != nil || len(list) <= keepVersions+1 {
		return err
	}
	for _, cm := range list[:len(list)-keepVersions-1] {
		if v, _ := strconv.ParseInt(cm.Labels[LabelVersion], 10, 64); v == es.Generation {
			continue
		}
		if err := r.Client.Delete(ctx, &cm); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// versionConfigMaps lists a service's version ConfigMaps, oldest first.
func versionConfigMaps(ctx context.Context, c client.Reader, ns, obj string) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(selectorLabels(obj))); err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(list.Items, func(cm corev1.ConfigMap) bool { return cm.Labels[LabelVersion] == "" })
	slices.SortFunc(out, func(a, b corev1.ConfigMap) int {
		va, _ := strconv.ParseInt(a.Labels[LabelVersion], 10, 64)
		vb, _ := strconv.ParseInt(b.Labels[LabelVersion], 10, 64)
		return int(va - vb)
	})
	return out, nil
}

func (r *Reconciler) pods(ctx context.Context, ns, obj string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(selectorLabels(obj))); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// writeStatus writes st when it differs from what es has, and records the
// change of status word as an event on es.
func (r *Reconciler) writeStatus(ctx context.Context, es *EASService, st Status) error {
	if equality.Semantic.DeepEqual(es.Status, st) {
		return nil
	}
	before := es.Status.Status
	es.Status = st
	if err := r.Client.Status().Update(ctx, es); err != nil {
		return err
	}
	if r.Recorder != nil && st.Status != before {
		kind := corev1.EventTypeNormal
		if st.Status == StatusFailed || st.Status == StatusWaiting {
			kind = corev1.EventTypeWarning
		}
		note := fmt.Sprintf("version %d: %s", st.CurrentVersion, st.Status)
		if st.Message != "" {
			note += ": " + st.Message
		}
		r.Recorder.Eventf(es, nil, kind, st.Status, "Reconcile", "%s", capMessage(note))
	}
	return nil
}

// status sets the EAS status from the Deployment and its pods: Running
// when every wanted replica of this version is ready; Failed when a pod
// cannot start (crash loop, image pull, bad config) or the rollout passed
// its deadline; Waiting when pods cannot be scheduled; Creating/Updating
// while the rollout goes on; Stopping/Stopped when scaled to 0.
func status(st *Status, es *EASService, dep *appsv1.Deployment, pods []corev1.Pod, want int32) {
	st.Replicas = want
	st.ReadyReplicas = dep.Status.ReadyReplicas
	st.UpdatedReplicas = dep.Status.UpdatedReplicas
	st.Reason, st.Message = "", ""
	version := strconv.FormatInt(es.Generation, 10)
	rolledOut := dep.Status.ObservedGeneration >= dep.Generation &&
		dep.Status.UpdatedReplicas == want && dep.Status.ReadyReplicas == want &&
		dep.Status.Replicas == want && dep.Status.AvailableReplicas == want
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, ObservedGeneration: es.Generation}
	switch {
	case want == 0 && rolledOut:
		st.Status, ready.Reason = StatusStopped, "Stopped"
		st.CurrentVersion = es.Generation
	case want == 0:
		st.Status, ready.Reason = StatusStopping, "Stopping"
	case rolledOut:
		st.Status, ready.Reason, ready.Status = StatusRunning, "AllReplicasReady", metav1.ConditionTrue
		st.CurrentVersion = es.Generation
	default:
		st.Status = StatusCreating
		if st.CurrentVersion != 0 {
			st.Status = StatusUpdating
		}
		ready.Reason = "RollingOut"
		if reason, msg, failed := podTrouble(pods, version); reason != "" {
			st.Reason, st.Message = reason, msg
			ready.Reason = reason
			if failed {
				st.Status = StatusFailed
			} else {
				st.Status = StatusWaiting
			}
		}
		for _, c := range dep.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
				st.Status, st.Reason, st.Message = StatusFailed, c.Reason, c.Message
				ready.Reason = c.Reason
			}
		}
	}
	ready.Message = capMessage(st.Message)
	meta.SetStatusCondition(&st.Conditions, ready)
}

// podTrouble finds why pods of version do not become ready: a reason that
// will not pass by itself (failed: crash loop, image, config) or a wait
// (unschedulable).
func podTrouble(pods []corev1.Pod, version string) (reason, msg string, failed bool) {
	for _, p := range pods {
		if p.Labels[LabelVersion] != version || p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
					"CreateContainerConfigError", "CreateContainerError", "RunContainerError":
					m := w.Message
					if t := cs.LastTerminationState.Terminated; t != nil && t.Message != "" {
						m = t.Message
					}
					return w.Reason, fmt.Sprintf("pod %s: %s", p.Name, m), true
				}
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return c.Reason, fmt.Sprintf("pod %s: %s", p.Name, c.Message), false
			}
		}
	}
	return "", "", false
}

// capMessage keeps a condition or event message within what the API
// accepts (conditions: 32768 bytes; events: 1024).
func capMessage(s string) string {
	const limit = 1000
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
