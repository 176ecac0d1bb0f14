package kube

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eas-server/eas-server/internal/syncbuf"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/internal/wait"
	"github.com/eas-server/eas-server/servicejson"
)

// buildBinary builds eas-server as the Makefile does (-trimpath, so the
// build cache of make build serves it).
func buildBinary(t *testing.T) string {
	t.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "eas-server")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/eas-server")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestPodTemplateRuns runs the rendered pod template as a local process:
// the container's args as rendered, with the ConfigMap and Secret written
// where their volumes mount (folders of a temporary root, as the kubelet
// would project them) and a free port for the container's. It predicts
// through it, then through the gateway, and sends SIGTERM as the kubelet
// does after preStop.
func TestPodTemplateRuns(t *testing.T) {
	cluster.Need(t) // before the build
	bin := buildBinary(t)
	const token = "pod-template-token-7431"
	raw := `{"name": "pod_echo", "processor": "echo", "token": "` + token + `", "metadata": {"instance": 1}}`
	spec, err := servicejson.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	ns := cluster.Namespace(t)
	objs, err := Render(spec, 1, 1, Options{Namespace: ns, Image: "eas-server:test", ShutdownGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pod := objs.Deployment.Spec.Template.Spec
	c := pod.Containers[0]

	// The volumes, mounted under root.
	root := t.TempDir()
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(mounts[m.MountPath], 0o700); err != nil {
			t.Fatal(err)
		}
		for _, v := range pod.Volumes {
			switch {
			case v.Name != m.Name:
			case v.ConfigMap != nil:
				if v.ConfigMap.Name != objs.ConfigMap.Name {
					t.Fatalf("volume %s mounts ConfigMap %s, want %s", v.Name, v.ConfigMap.Name, objs.ConfigMap.Name)
				}
				for k, data := range objs.ConfigMap.Data {
					writeFile(t, filepath.Join(mounts[m.MountPath], k), data)
				}
			case v.Secret != nil:
				if v.Secret.SecretName != TokenSecretName(objs.Deployment.Name) {
					t.Fatalf("volume %s mounts Secret %s", v.Name, v.Secret.SecretName)
				}
				writeFile(t, filepath.Join(mounts[m.MountPath], TokenKey), token)
			}
		}
	}
	if strings.Contains(objs.ConfigMap.Data[ConfigFile], token) {
		t.Fatal("the ConfigMap holds the token")
	}
	port := freePort(t)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = a
		if i > 0 && c.Args[i-1] == "--listen" {
			args[i] = fmt.Sprintf("127.0.0.1:%d", port)
			continue
		}
		// The longest mount path that prefixes the argument.
		best := ""
		for mp := range mounts {
			if (a == mp || strings.HasPrefix(a, mp+"/")) && len(mp) > len(best) {
				best = mp
			}
		}
		if best != "" {
			args[i] = mounts[best] + strings.TrimPrefix(a, best)
		}
	}
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, "HOME="+root)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	// The probes, by the template's paths.
	waitStatus(t, base+c.ReadinessProbe.HTTPGet.Path, 200, logs)
	waitStatus(t, base+c.LivenessProbe.HTTPGet.Path, 200, logs)

	predict := func(url, tok string) (int, string) {
		code, b, _ := teststack.Do(t, "POST", url+"/api/predict/pod_echo", tok, []byte("hello pod"))
		return code, string(b)
	}
	if code, body := predict(base, token); code != 200 || body != "hello pod" {
		t.Fatalf("predict with the Secret's token: %d %q\n%s", code, body, logs.String())
	}
	if code, _ := predict(base, "wrong"); code != 401 {
		t.Errorf("predict with a wrong token: %d, want 401", code)
	}
	// The pod has no control plane.
	if resp, err := http.Get(base + "/api/v2/services"); err != nil || resp.StatusCode != 401 {
		t.Errorf("control plane in the pod: %v %v, want 401", resp, err)
	}

	// The gateway, on the real API server: it knows the service from its
	// Service object and proxies to it.
	if _, err := cluster.Client.CoreV1().Services(ns).Create(context.Background(), objs.Service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := &Gateway{Namespace: ns, Upstream: func(obj string) string {
		if obj != objs.Service.Name {
			t.Errorf("gateway chose upstream %s, want %s", obj, objs.Service.Name)
		}
		return base
	}}
	g.Start(ctx, cluster.Client)
	gs := httptest.NewServer(g)
	defer gs.Close()
	waitStatus(t, gs.URL+"/readyz", 200, logs)
	wait.Until(t, 10*time.Second, func() error {
		if code, body := predict(gs.URL, token); code != 200 || body != "hello pod" {
			return fmt.Errorf("predict through the gateway: %d %q, want 200 \"hello pod\"", code, body)
		}
		return nil
	})
	if code, _ := predict(gs.URL, "wrong"); code != 401 {
		t.Errorf("gateway, wrong token: %d, want the pod's 401", code)
	}
	if code, body, _ := teststack.Do(t, "POST", gs.URL+"/api/predict/no_such_service", token, []byte("x")); code != 401 {
		t.Errorf("gateway, unknown service: %d %s, want 401", code, body)
	}
	if resp, err := http.Get(gs.URL + "/elsewhere"); err != nil || resp.StatusCode != 404 {
		t.Errorf("gateway, other path: %v %v, want 404", resp, err)
	}

	// SIGTERM, as the kubelet sends after preStop: the process drains and
	// exits 0 within the grace period the template gives.
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM\n%s", err, logs.String())
		}
		grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
		if took := time.Since(start); took > grace {
			t.Errorf("drain took %s, more than terminationGracePeriodSeconds %s", took, grace)
		}
	case <-time.After(time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second):
		t.Fatalf("serve did not exit within terminationGracePeriodSeconds\n%s", logs.String())
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the pod's log holds the token:\n%s", logs.String())
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitStatus(t *testing.T, url string, want int, logs *syncbuf.Buffer) {
	t.Helper()
	err := wait.Poll(60*time.Second, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return fmt.Errorf("%s never answered %d: %w", url, want, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("%s never answered %d: %s", url, want, resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
}

// TestRenderQueueBroker: an asynchronous service's pods get the broker, so
// they share one input queue and sink; a synchronous service's do not.
func TestRenderQueueBroker(t *testing.T) {
	opt := Options{Namespace: "ns", Image: "eas-server:test", QueueBroker: "nats://nats:4222"}
	for _, tc := range []struct {
		js   string
		want bool
	}{
		{`{"name": "a", "processor": "echo", "metadata": {"instance": 2, "type": "Async"}}`, true},
		{`{"name": "s", "processor": "echo", "metadata": {"instance": 2}}`, false},
	} {
		spec, err := servicejson.Parse([]byte(tc.js))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Render(spec, 1, 2, opt)
		if err != nil {
			t.Fatal(err)
		}
		args := objs.Deployment.Spec.Template.Spec.Containers[0].Args
		i := slices.Index(args, "--queue-broker")
		if got := i >= 0 && i+1 < len(args) && args[i+1] == opt.QueueBroker; got != tc.want {
			t.Errorf("%s: args %q, want the broker: %v", spec.Name, args, tc.want)
		}
	}
}
