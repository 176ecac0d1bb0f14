package kubetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eas-server/eas-server/internal/kube/kubetest"
)

var cluster *kubetest.Cluster

func TestMain(m *testing.M) { kubetest.Main(m, &cluster) }

func deployment(name string, replicas int32, probes bool) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	c := corev1.Container{
		Name:  "main",
		Image: "registry.invalid/never-pulled:1",
		Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: mustQ("1"), "nvidia.com/gpu": mustQ("1")},
			Limits:   corev1.ResourceList{"nvidia.com/gpu": mustQ("1")},
		},
	}
	if probes {
		// Probes that could never succeed: nothing listens, nothing runs.
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/never", Port: intstr.FromInt32(8080)},
		}, PeriodSeconds: 1, FailureThreshold: 1}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"false"}},
		}, PeriodSeconds: 1, FailureThreshold: 1}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
			},
		},
	}
}

// waitReady waits for the Deployment's pods to be replicas Running and
// Ready pods on the kwok node, and for the Deployment to count them.
func waitReady(t *testing.T, ns, name string, replicas int) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods []corev1.Pod
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		list, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		pods = list.Items
		ready := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == kubetest.NodeName && podReady(&p) {
				ready++
			}
		}
		last = fmt.Sprintf("%d pods, %d running and ready; deployment readyReplicas %d availableReplicas %d",
			len(pods), ready, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
		return ready == replicas && len(pods) == replicas && int(d.Status.ReadyReplicas) == replicas, nil
	})
	if err != nil {
		t.Fatalf("deployment %s/%s: %v (%s)%s%s", ns, name, err, last,
			cluster.LogTail("kube-scheduler"), cluster.LogTail("kwok"))
	}
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestDeploymentBecomesReady(t *testing.T) {
	ns := cluster.Namespace(t)
	ctx := context.Background()
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, deployment("web", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitReady(t, ns, "web", 2)
	for _, p := range pods {
		if p.Status.PodIP == "" {
			t.Errorf("pod %s has no IP", p.Name)
		}
		// The ServiceAccount admission plugin is on.
		if p.Spec.ServiceAccountName != "default" {
			t.Errorf("pod %s: serviceAccountName %q, want default (ServiceAccount admission)", p.Name, p.Spec.ServiceAccountName)
		}
	}
}

// kwok evaluates no probes: a readiness probe that can never pass and a
// liveness probe that always fails leave the pods Ready, never restarted.
func TestProbesIgnored(t *testing.T) {
	ns := cluster.Namespace(t)
	ctx := context.Background()
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, deployment("probed", 1, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := waitReady(t, ns, "probed", 1)
	// Not synchronisation: there is nothing to wait for, the check is that
	// nothing happens. A kubelet would have marked the pod unready and
	// restarted its container within one period (failureThreshold 1);
	// give it two.
	time.Sleep(2 * time.Duration(pods[0].Spec.Containers[0].ReadinessProbe.PeriodSeconds) * time.Second)
	p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !podReady(p) {
		t.Errorf("pod %s not Ready after its probes' periods", p.Name)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount != 0 || !cs.Ready {
			t.Errorf("container %s: restarts %d, ready %v", cs.Name, cs.RestartCount, cs.Ready)
		}
	}
}

// Deleting an owner deletes its dependents: the garbage collector follows
// ownerReferences, a Deployment's down to its pods, and a ConfigMap owned by
// another ConfigMap (the way the backend owns its objects).
func TestGarbageCollection(t *testing.T) {
	ns := cluster.Namespace(t)
	ctx := context.Background()
	cms := cluster.Client.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, deployment("gc", 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "gc", 2)

	// Background propagation: the owner goes at once, the collector
	// deletes the dependents afterwards.
	bg := metav1.DeletePropagationBackground
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.AppsV1().Deployments(ns).Delete(ctx, "gc", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last string
	err = wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, "dependent", metav1.GetOptions{})
		cmGone := apierrors.IsNotFound(err)
		rs, err := cluster.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("dependent ConfigMap gone: %v, %d ReplicaSets, %d pods", cmGone, len(rs.Items), len(pods.Items))
		return cmGone && len(rs.Items) == 0 && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("dependents not collected: %v (%s)%s", err, last, cluster.LogTail("kube-controller-manager"))
	}
}

func TestNode(t *testing.T) {
	cluster.Need(t)
	n, err := cluster.Client.CoreV1().Nodes().Get(context.Background(), kubetest.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["type"] != "kwok" || n.Annotations["kwok.x-k8s.io/node"] != "fake" || len(n.Spec.Taints) != 0 {
		t.Errorf("node labels %v annotations %v taints %v", n.Labels, n.Annotations, n.Spec.Taints)
	}
	for name, want := range kubetest.NodeCapacity {
		if got := n.Status.Allocatable[name]; got.Cmp(want) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, got.String(), want.String())
		}
	}
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
