package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eas-server/eas-server/deploy"
	"github.com/eas-server/eas-server/internal/controlapi"
	"github.com/eas-server/eas-server/internal/kube/kubetest"
	"github.com/eas-server/eas-server/internal/wait"
	_ "github.com/eas-server/eas-server/processors/all"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) {
	crd, err := deploy.CRDFile()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctrl.SetLogger(logr.Discard())
	kubetest.Main(m, &cluster, crd)
}

const adminToken = "test-admin-token"

// controller is one running eas-server controller: its reconcile loop on
// the real API server and its API on a loopback HTTP server.
type controller struct {
	t      *testing.T
	ns     string
	url    string
	cancel context.CancelFunc
	done   chan error
	c      client.Client
	ctl    *Controller
}

func startController(t *testing.T, ns string) *controller {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctl, err := NewController(ControllerConfig{
		Rest: cluster.Config, AdminToken: adminToken, Log: log,
		Options:            Options{Namespace: ns, Image: "eas-server:test", ShutdownGrace: 20 * time.Second},
		skipNameValidation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Manager.Start(ctx) }()
	hs := httptest.NewServer(ctl.Handler)
	c, err := client.New(cluster.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	k := &controller{t: t, ns: ns, url: hs.URL, cancel: cancel, done: done, c: c, ctl: ctl}
	t.Cleanup(func() { hs.Close(); k.stop() })
	return k
}

func (k *controller) stop() {
	if k.cancel == nil {
		return
	}
	k.cancel()
	k.cancel = nil
	if err := <-k.done; err != nil {
		k.t.Errorf("controller: %v", err)
	}
}

// call sends one control plane request; it returns the status and body.
func (k *controller) call(method, path string, body any) (int, []byte) {
	k.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, _ := json.Marshal(b)
		rd = bytes.NewReader(js)
	}
	req, _ := http.NewRequest(method, k.url+path, rd)
	req.Header.Set("Authorization", adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (k *controller) mustCall(want int, method, path string, body any, into any) {
	k.t.Helper()
	code, out := k.call(method, path, body)
	if code != want {
		k.t.Fatalf("%s %s: %d %s, want %d", method, path, code, out, want)
	}
	if into != nil {
		if err := json.Unmarshal(out, into); err != nil {
			k.t.Fatalf("%s %s: %v in %s", method, path, err, out)
		}
	}
}

func (k *controller) desc(name string) controlapi.ServiceObject {
	var obj controlapi.ServiceObject
	k.mustCall(200, "GET", "/api/v2/services/local/"+name, nil, &obj)
	return obj
}

// waitFor polls desc until ok says so.
func (k *controller) waitFor(name, what string, ok func(controlapi.ServiceObject) bool) controlapi.ServiceObject {
	k.t.Helper()
	var obj controlapi.ServiceObject
	err := wait.Poll(90*time.Second, func() error {
		if obj = k.desc(name); !ok(obj) {
			return fmt.Errorf("service %s never became %s; last: %+v", name, what, obj)
		}
		return nil
	})
	if err != nil {
		k.t.Fatalf("%v%s", err, cluster.LogTail("kwok"))
	}
	return obj
}

func running(version int) func(controlapi.ServiceObject) bool {
	return func(o controlapi.ServiceObject) bool {
		return o.Status == StatusRunning && o.CurrentVersion == version && o.PendingVersion == 0 && o.RunningInstance == o.TotalInstance
	}
}

func echoJSON(name string, instance int, extra string) string {
	if !strings.Contains(extra, "model_config") {
		extra += `, "model_config": {"sleep_ms": 0}`
	}
	return fmt.Sprintf(`{"name": %q, "processor": "echo", "token": "tok-%s-secret"%s,
		"metadata": {"instance": %d, "cpu": 1, "memory": 256}}`, name, name, extra, instance)
}

func (k *controller) get(name string, o client.Object) {
	k.t.Helper()
	if err := k.c.Get(context.Background(), types.NamespacedName{Namespace: k.ns, Name: name}, o); err != nil {
		k.t.Fatalf("get %T %s: %v", o, name, err)
	}
}

// TestServiceLifecycle drives every CLI verb's API call against the real
// API server: create, desc, instances, events, modify (a rolling update
// with maxUnavailable 0), versions, stop, start, delete.
func TestServiceLifecycle(t *testing.T) {
	ns := cluster.Namespace(t)
	k := startController(t, ns)

	var created controlapi.ChangeAnswer
	k.mustCall(201, "POST", "/api/v2/services", echoJSON("my_echo", 2, ""), &created)
	if created.AccessToken != "tok-my_echo-secret" {
		t.Errorf("create answered token %q, want the service.json's", created.AccessToken)
	}
	for _, w := range created.Warnings {
		if strings.HasPrefix(w, "metadata.cpu") || strings.HasPrefix(w, "metadata.memory") {
			t.Errorf("warning %q: cpu and memory take effect on Kubernetes", w)
		}
	}
	obj := k.waitFor("my_echo", "Running v1", running(1))
	if obj.RunningInstance != 2 || obj.AccessToken != "tok-my_echo-secret" {
		t.Errorf("desc: %+v", obj)
	}

	// The objects, with their fields.
	var dep appsv1.Deployment
	k.get("eas-my-echo", &dep)
	if *dep.Spec.Replicas != 2 || dep.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("deployment replicas %d, maxUnavailable %v", *dep.Spec.Replicas, dep.Spec.Strategy.RollingUpdate.MaxUnavailable)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("probes or preStop wrong: %+v %+v %+v", c.ReadinessProbe, c.LivenessProbe, c.Lifecycle)
	}
	if *pod.TerminationGracePeriodSeconds <= 20+5 {
		t.Errorf("terminationGracePeriodSeconds %d is not above the shutdown grace plus the waits", *pod.TerminationGracePeriodSeconds)
	}
	if got := c.Resources.Limits.Cpu().String() + " " + c.Resources.Requests.Memory().String(); got != "1 256Mi" {
		t.Errorf("resources %q, want 1 cpu and 256Mi", got)
	}
	var sec corev1.Secret
	k.get("eas-my-echo-token", &sec)
	if string(sec.Data[TokenKey]) != "tok-my_echo-secret" {
		t.Errorf("token secret holds %q", sec.Data[TokenKey])
	}
	var cm corev1.ConfigMap
	k.get("eas-my-echo-v1", &cm)
	var svc corev1.Service
	k.get("eas-my-echo", &svc)
	var es EASService
	k.get("my-echo", &es)
	for _, o := range []client.Object{&dep, &sec, &cm, &svc, &es} {
		noToken(t, o, "tok-my_echo-secret")
	}
	for _, o := range []client.Object{&dep, &sec, &cm, &svc} {
		if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != es.UID {
			t.Errorf("%T %s: owner references %+v, want the EASService", o, o.GetName(), refs)
		}
	}

	var inst controlapi.InstanceList
	k.mustCall(200, "GET", "/api/v2/services/local/my_echo/instances", nil, &inst)
	if inst.TotalCount != 2 || inst.Instances[0].Status != "Running" || inst.Instances[0].Version != 1 {
		t.Errorf("instances: %+v", inst)
	}

	// Modify: version 2, a new ReplicaSet, rolled out without going
	// below the wanted count of ready pods.
	k.mustCall(200, "PUT", "/api/v2/services/local/my_echo", echoJSON("my_echo", 2, `, "model_config": {"sleep_ms": 1}`), nil)
	minReady := watchReady(t, k, "eas-my-echo")
	k.waitFor("my_echo", "Running v2", running(2))
	if got := minReady(); got < 2 {
		t.Errorf("during the rolling update ready pods fell to %d, want never below 2 (maxUnavailable 0)", got)
	}
	var rsl appsv1.ReplicaSetList
	if err := k.c.List(context.Background(), &rsl, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(rsl.Items) != 2 {
		t.Errorf("%d ReplicaSets after a modify, want 2", len(rsl.Items))
	}
	var vl controlapi.VersionList
	k.mustCall(200, "GET", "/api/v2/services/local/my_echo/versions", nil, &vl)
	if len(vl.Versions) != 2 || vl.CurrentVersion != 2 || !vl.Versions[1].Current || vl.Versions[0].Processor != "echo" {
		t.Errorf("versions: %+v", vl)
	}
	var ev controlapi.EventList
	k.mustCall(200, "GET", "/api/v2/services/local/my_echo/events", nil, &ev)
	reasons := map[string]bool{}
	for _, e := range ev.Events {
		reasons[e.Reason] = true
	}
	if !reasons["ScalingReplicaSet"] || !reasons[StatusRunning] {
		t.Errorf("events lack the Deployment's ScalingReplicaSet or the service's Running: %+v", reasons)
	}

	// Stop, start.
	k.mustCall(200, "PUT", "/api/v2/services/local/my_echo/stop", "{}", nil)
	k.waitFor("my_echo", "Stopped", func(o controlapi.ServiceObject) bool { return o.Status == StatusStopped && o.RunningInstance == 0 })
	k.get("eas-my-echo", &dep)
	if *dep.Spec.Replicas != 0 {
		t.Errorf("stopped: %d replicas", *dep.Spec.Replicas)
	}
	var started controlapi.ServiceObject
	k.mustCall(200, "PUT", "/api/v2/services/local/my_echo/start", "{}", &started)
	if started.Status == StatusStopped || started.Status == StatusRunning && started.RunningInstance == 0 {
		t.Errorf("start answered %s: the CLI would stop waiting at once", started.Status)
	}
	k.waitFor("my_echo", "Running again", running(2))

	// A new token alone: the Secret changes and the pods roll onto it.
	k.mustCall(200, "PUT", "/api/v2/services/local/my_echo", strings.Replace(echoJSON("my_echo", 2, `, "model_config": {"sleep_ms": 1}`), "tok-my_echo-secret", "tok-my_echo-rotated", 1), nil)
	wait.Until(t, 60*time.Second, func() error {
		k.get("eas-my-echo", &dep)
		if dep.Spec.Template.Annotations[annotationTokenGeneration] != "2" {
			return fmt.Errorf("a new token did not roll the pods: template annotations %v", dep.Spec.Template.Annotations)
		}
		return nil
	})
	k.waitFor("my_echo", "Running on the new token", running(2))
	if obj := k.desc("my_echo"); obj.AccessToken != "tok-my_echo-rotated" {
		t.Errorf("desc token after rotation: %q", obj.AccessToken)
	}

	// Delete: everything goes, through owner references.
	k.mustCall(200, "DELETE", "/api/v2/services/local/my_echo", nil, nil)
	if code, _ := k.call("GET", "/api/v2/services/local/my_echo", nil); code != 404 {
		t.Errorf("desc after delete: %d, want 404", code)
	}
	waitGone(t, k, &appsv1.Deployment{}, "eas-my-echo")
	waitGone(t, k, &corev1.Secret{}, "eas-my-echo-token")
	waitGone(t, k, &corev1.ConfigMap{}, "eas-my-echo-v1")
	waitGone(t, k, &corev1.Service{}, "eas-my-echo")
}

// noToken fails when the token appears anywhere in o but a Secret's data.
func noToken(t *testing.T, o client.Object, token string) {
	t.Helper()
	cp := o.DeepCopyObject()
	if s, ok := cp.(*corev1.Secret); ok {
		s.Data = nil
	}
	js, _ := json.Marshal(cp)
	if bytes.Contains(js, []byte(token)) {
		t.Errorf("%T %s holds the token: %s", o, o.GetName(), js)
	}
}

// watchReady samples the Deployment's ready count until the returned
// function is called, which gives the lowest count seen.
func watchReady(t *testing.T, k *controller, name string) func() int32 {
	stop := make(chan struct{})
	lowest := make(chan int32, 1)
	go func() {
		low := int32(1 << 30)
		for {
			var dep appsv1.Deployment
			if k.c.Get(context.Background(), types.NamespacedName{Namespace: k.ns, Name: name}, &dep) == nil && dep.Status.ReadyReplicas < low {
				low = dep.Status.ReadyReplicas
			}
			select {
			case <-stop:
				lowest <- low
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int32 { close(stop); return <-lowest }
}

func waitGone(t *testing.T, k *controller, o client.Object, name string) {
	t.Helper()
	err := wait.Poll(60*time.Second, func() error {
		if err := k.c.Get(context.Background(), types.NamespacedName{Namespace: k.ns, Name: name}, o); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s still exists after its service was deleted (get: %v)", o, name, err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("%v%s", err, cluster.LogTail("kube-controller-manager"))
	}
}

// TestInvalidWritesNothing: a service.json the processor refuses, or whose
// name cannot be a Kubernetes name, is a 400 before any object exists.
func TestInvalidWritesNothing(t *testing.T) {
	ns := cluster.Namespace(t)
	k := startController(t, ns)
	for _, body := range []string{
		`{"name": "bad", "processor": "echo", "model_config": {"no_such_key": 1}, "metadata": {"instance": 1}}`,
		`{"name": "bad_", "processor": "echo", "metadata": {"instance": 1}}`,
		`{"name": "bad", "processor": "echo", "metadata": {"instance": 1}, "autoscaler": {"min": 1, "max": 3, "scaleStrategies": [{"metricName": "gpu", "threshold": 5}]}}`,
		`{"name": "bad", "processor": "echo", "metadata": {"instance": 1}, "autoscaler": {"min": 1, "max": 3, "scaleStrategies": [{"metricName": "cpu", "threshold": 50}]}}`,
	} {
		code, out := k.call("POST", "/api/v2/services", body)
		if code != 400 {
			t.Errorf("%s: %d %s, want 400", body, code, out)
		}
	}
	var list EASServiceList
	if err := k.c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var secrets corev1.SecretList
	if err := k.c.List(context.Background(), &secrets, client.InNamespace(ns), client.MatchingLabels{LabelManagedBy: ManagedBy}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items)+len(secrets.Items) != 0 {
		t.Errorf("refused creates left %d EASServices and %d Secrets", len(list.Items), len(secrets.Items))
	}
}

// TestAutoscalerHPA: the autoscaler section becomes an autoscaling/v2 HPA,
// and dropping it removes the HPA.
func TestAutoscalerHPA(t *testing.T) {
	ns := cluster.Namespace(t)
	k := startController(t, ns)
	as := `, "autoscaler": {"min": 1, "max": 4, "scaleStrategies": [{"metricName": "qps", "threshold": 10}, {"metricName": "cpu", "threshold": 70}],
		"behavior": {"scaleDown": {"stabilizationWindowSeconds": 120}}}`
	k.mustCall(201, "POST", "/api/v2/services", echoJSON("scaled", 2, as), nil)
	k.waitFor("scaled", "Running", running(1))
	var h autoscalingv2.HorizontalPodAutoscaler
	k.get("eas-scaled", &h)
	if *h.Spec.MinReplicas != 1 || h.Spec.MaxReplicas != 4 || h.Spec.ScaleTargetRef.Name != "eas-scaled" || len(h.Spec.Metrics) != 2 {
		t.Fatalf("hpa spec: %+v", h.Spec)
	}
	for _, m := range h.Spec.Metrics {
		switch m.Type {
		case autoscalingv2.ResourceMetricSourceType:
			if m.Resource.Name != corev1.ResourceCPU || *m.Resource.Target.AverageUtilization != 70 {
				t.Errorf("cpu metric: %+v", m.Resource)
			}
		case autoscalingv2.PodsMetricSourceType:
			if m.Pods.Metric.Name != QPSMetric || m.Pods.Target.AverageValue.Value() != 10 {
				t.Errorf("qps metric: %+v", m.Pods)
			}
		default:
			t.Errorf("metric type %s", m.Type)
		}
	}
	if h.Spec.Behavior == nil || *h.Spec.Behavior.ScaleDown.StabilizationWindowSeconds != 120 {
		t.Errorf("behavior: %+v", h.Spec.Behavior)
	}
	k.mustCall(200, "PUT", "/api/v2/services/local/scaled", echoJSON("scaled", 2, ""), nil)
	k.waitFor("scaled", "Running v2", running(2))
	waitGone(t, k, &autoscalingv2.HorizontalPodAutoscaler{}, "eas-scaled")
}

// TestRestartIsNoop: a new controller over objects that are right writes
// nothing: no spec changes, no new ReplicaSet, no other object changes.
func TestRestartIsNoop(t *testing.T) {
	ns := cluster.Namespace(t)
	k := startController(t, ns)
	k.mustCall(201, "POST", "/api/v2/services", echoJSON("steady", 1, ""), nil)
	k.waitFor("steady", "Running", running(1))
	k.stop() // returns once its loop has ended: it writes nothing more
	before := resourceVersions(t, k)
	k2 := startController(t, ns)
	// The new loop reconciles every EASService at start; a pass that finds
	// everything right writes nothing, so its count is what shows it ran.
	wait.Until(t, 60*time.Second, func() error {
		if n := k2.ctl.Reconciler.Completed(); n < 1 {
			return fmt.Errorf("the new controller has completed %d reconciles, want 1 (the service at start)", n)
		}
		return nil
	})
	after := resourceVersions(t, k2)
	for key, v := range before {
		if after[key] != v {
			t.Errorf("%s: %s -> %s after a controller restart", key, v, after[key])
		}
	}
	if len(after) != len(before) {
		t.Errorf("objects before %v, after %v", before, after)
	}
}

func resourceVersions(t *testing.T, k *controller) map[string]string {
	t.Helper()
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"EASService": &EASServiceList{}, "Deployment": &appsv1.DeploymentList{}, "ReplicaSet": &appsv1.ReplicaSetList{},
		"Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{},
	}
	for kind, l := range lists {
		if err := k.c.List(context.Background(), l, client.InNamespace(k.ns)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o, err := meta.Accessor(item)
			if err != nil {
				t.Fatal(err)
			}
			if kind == "ConfigMap" && o.GetName() == "kube-root-ca.crt" {
				continue
			}
			// What the controller writes: a Deployment's or an
			// EASService's spec (generation; the Kubernetes controllers
			// keep writing their status for a while after Running), no
			// new ReplicaSet (names), the rest whole (resourceVersion).
			switch kind {
			case "Deployment", "EASService":
				out[kind+"/"+o.GetName()] = fmt.Sprint("generation ", o.GetGeneration())
			case "ReplicaSet":
				out[kind+"/"+o.GetName()] = "exists"
			default:
				out[kind+"/"+o.GetName()] = o.GetResourceVersion()
			}
		}
	}
	return out
}

// TestCRDApply: an EASService written directly (what kubectl apply does)
// converges like a create through the API, its token moves to the Secret,
// and its status conditions are written back.
func TestCRDApply(t *testing.T) {
	ns := cluster.Namespace(t)
	k := startController(t, ns)
	es := &EASService{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "gitops", Namespace: ns},
		// No "name": a kubectl user need not repeat metadata.name.
		Spec: json.RawMessage(`{"processor": "echo", "token": "gitops-token-1234", "metadata": {"instance": 2}}`),
	}
	if err := k.c.Create(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	obj := k.waitFor("gitops", "Running", running(1))
	if obj.AccessToken != "gitops-token-1234" {
		t.Errorf("token %q, want the spec's", obj.AccessToken)
	}
	k.get("gitops", es)
	var ready *metav1.Condition
	for i, c := range es.Status.Conditions {
		if c.Type == "Ready" {
			ready = &es.Status.Conditions[i]
		}
	}
	if ready == nil || ready.Status != metav1.ConditionTrue || es.Status.ReadyReplicas != 2 || es.Status.ObservedGeneration != es.Generation {
		t.Errorf("status: %+v", es.Status)
	}
	// A spec the processor refuses: Failed with the reason; the running
	// version keeps running.
	es.Spec = json.RawMessage(`{"processor": "echo", "model_config": {"no_such_key": 1}, "metadata": {"instance": 2}}`)
	if err := k.c.Update(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	obj = k.waitFor("gitops", "Failed", func(o controlapi.ServiceObject) bool { return o.Status == StatusFailed })
	if !strings.Contains(obj.Message, "no_such_key") || obj.Reason != "InvalidSpec" {
		t.Errorf("failed status: %s %s", obj.Reason, obj.Message)
	}
	var dep appsv1.Deployment
	k.get("eas-gitops", &dep)
	if dep.Status.ReadyReplicas != 2 || dep.Spec.Template.Labels[LabelVersion] != "1" {
		t.Errorf("the serving version was disturbed: ready %d, version %s", dep.Status.ReadyReplicas, dep.Spec.Template.Labels[LabelVersion])
	}
}
