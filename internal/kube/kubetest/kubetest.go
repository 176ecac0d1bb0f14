// Package kubetest starts a real Kubernetes control plane for tests, without
// Docker or a kubelet: etcd and kube-apiserver (through controller-runtime's
// envtest), kube-controller-manager, kube-scheduler and kwok, which plays one
// fake Node on which the pods of Deployments become Running and Ready.
//
// The binaries come from scripts/build-k8s-tools.sh (see ToolsDir). A test
// binary starts one cluster from TestMain with Main and gives each test its
// own namespace with Cluster.Namespace:
//
//	var cluster *kubetest.Cluster
//
//	func TestMain(m *testing.M) { kubetest.Main(m, &cluster) }
//
// What is real: the API (validation, admission with the ServiceAccount
// plugin on, RBAC, CRDs, watches), the controllers named in controllers
// (Deployments, ReplicaSets, garbage collection through ownerReferences,
// namespace deletion, EndpointSlices, ServiceAccounts, HPAs), scheduling onto
// the Node by its allocatable resources. What is fake: the Node and every
// pod on it. kwok sets a pod Running and Ready as soon as it is bound,
// without pulling images or running containers, and evaluates no probes: a
// readiness or liveness probe changes nothing. There are no metrics
// (metrics.k8s.io), so an HPA never scales.
package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	_ "embed"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/eas-server/eas-server/internal/require"
)

// K8sVersion is the Kubernetes version scripts/build-k8s-tools.sh builds by
// default; the default tools directory is named after it.
const K8sVersion = "1.37.2"

// NodeName is the one fake Node kwok manages.
const NodeName = "kwok-node-0"

// NodeCapacity is the Node's capacity and allocatable.
var NodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("32"),
	corev1.ResourceMemory: resource.MustParse("256Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
	"nvidia.com/gpu":      resource.MustParse("8"),
}

// binaries are the files Start needs in ToolsDir.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// controllers are the kube-controller-manager controllers that run.
var controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"garbage-collector-controller",
	"horizontal-pod-autoscaler-controller",
	"namespace-controller",
	"endpointslice-controller",
	"endpoints-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"pod-garbage-collector-controller",
	// It takes off the not-ready taint the TaintNodesByCondition admission
	// plugin puts on every new Node, once the Node is Ready.
	"node-lifecycle-controller",
}

//go:embed kwok-stages.yaml
var kwokStages []byte

// startTimeout bounds each wait of Start.
const startTimeout = 60 * time.Second

// ToolsDir returns the directory of the binaries scripts/build-k8s-tools.sh
// builds: $EAS_K8S_TOOLS_DIR, else ${XDG_CACHE_HOME:-~/.cache}/eas-server/k8s-<K8sVersion>.
// It fails, saying to run that script, when one of etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok is missing there.
func ToolsDir() (string, error) {
	dir := os.Getenv("EAS_K8S_TOOLS_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("kubetest: no cache directory for the Kubernetes test tools (%v); set EAS_K8S_TOOLS_DIR or run scripts/build-k8s-tools.sh", err)
		}
		dir = filepath.Join(cache, "eas-server", "k8s-"+K8sVersion)
	}
	var missing []string
	for _, b := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return dir, fmt.Errorf("kubetest: %s missing in %s: run scripts/build-k8s-tools.sh (about 20 minutes once per machine)", strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

// Cluster is a running control plane with one fake Node, NodeName: Ready,
// labelled type=kwok, annotated kwok.x-k8s.io/node=fake, untainted, with
// NodeCapacity.
type Cluster struct {
	Config     *rest.Config         // admin credentials (system:masters)
	Kubeconfig string               // a kubeconfig file with the same admin credentials, for child processes
	Client     kubernetes.Interface // a client with Config

	dir      string // logs, kubeconfig, certificates; removed by Stop
	env      *envtest.Environment
	procs    []*proc
	keepLogs bool
	stopOnce sync.Once
	missing  error // the tools are missing: no control plane runs (see Main)
}

// Need ends t, through require.Missing, when the cluster could not start
// because the Kubernetes tools are missing; a test calls it (or Namespace)
// before it uses Config or Client.
func (c *Cluster) Need(t testing.TB) {
	t.Helper()
	if c.missing != nil {
		require.Missing(t, require.K8s, "%v", c.missing)
	}
}

// proc is one process Start started besides etcd and kube-apiserver.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when cmd.Wait returned
	err  error         // cmd.Wait's result, set before done closes
}

// Start starts a cluster. The CRD files given (apiextensions.k8s.io/v1 YAML
// or JSON, files or directories of them) are installed and established
// before it returns. The logs of each process go to files in a temporary
// directory; an error names the process and includes the tail of its log.
// Start takes about 10 seconds on 2 cores. Everything it started is stopped
// again when it fails.
func Start(crdPaths ...string) (_ *Cluster, err error) {
	tools, err := ToolsDir()
	if err != nil {
		return nil, err
	}
	// The script's etcd, not Debian's 3.4: kube-apiserver needs a newer
	// one to serve watch progress (see scripts/build-k8s-tools.sh).
	etcd := filepath.Join(tools, "etcd")
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	c := &Cluster{dir: dir}
	defer func() {
		if err != nil {
			c.keepLogs = true
			c.Stop()
		}
	}()
	certDir := filepath.Join(dir, "apiserver")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	etcdLog, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	defer etcdLog.Close()
	apiLog, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	defer apiLog.Close()

	apiServer := &envtest.APIServer{
		Path:    filepath.Join(tools, "kube-apiserver"),
		CertDir: certDir,
		Out:     apiLog,
		Err:     apiLog,
	}
	// envtest turns the ServiceAccount admission plugin off, as it runs no
	// controller that creates the default ServiceAccount; here one does, so
	// pods are admitted as in a real cluster (and refused for a missing
	// ServiceAccount).
	apiServer.Configure().Disable("disable-admission-plugins")
	c.env = &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:    etcd,
				DataDir: filepath.Join(dir, "etcd"),
				Out:     etcdLog,
				Err:     etcdLog,
			},
			APIServer: apiServer,
		},
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  10 * time.Second,
	}
	if _, err := c.env.Start(); err != nil {
		return nil, fmt.Errorf("kubetest: etcd and kube-apiserver: %w%s%s", err,
			logTail("kube-apiserver", apiLog.Name()), logTail("etcd", etcdLog.Name()))
	}
	c.Config = rest.CopyConfig(c.env.Config)
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, c.env.KubeConfig, 0o600); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	c.Client = client
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	if _, err := client.CoreV1().Nodes().Create(ctx, fakeNode(), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("kubetest: creating Node %s: %w", NodeName, err)
	}
	rootCA := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(rootCA, c.Config.CAData, 0o600); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	kwokConfig := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, kwokStages, 0o600); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	kcmPort, schedPort := ports[0], ports[1]
	kcm, err := c.startProc(tools, "kube-controller-manager",
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(kcmPort),
		"--cert-dir="+filepath.Join(dir, "kube-controller-manager"),
		"--controllers="+strings.Join(controllers, ","),
		// The key kube-apiserver verifies ServiceAccount tokens with
		// (envtest writes it beside the serving certificate).
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file="+rootCA,
	)
	if err != nil {
		return nil, err
	}
	sched, err := c.startProc(tools, "kube-scheduler",
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(schedPort),
		"--cert-dir="+filepath.Join(dir, "kube-scheduler"),
	)
	if err != nil {
		return nil, err
	}
	kwok, err := c.startProc(tools, "kwok",
		"--kubeconfig="+c.Kubeconfig,
		"--config="+kwokConfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--manage-nodes-with-label-selector=",
		"--disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom",
		"--cidr=10.0.0.1/24",
		"--node-ip=10.0.0.1",
	)
	if err != nil {
		return nil, err
	}

	if err := kcm.waitHealthy(ctx, kcmPort); err != nil {
		return nil, err
	}
	if err := sched.waitHealthy(ctx, schedPort); err != nil {
		return nil, err
	}
	// The Node Ready (kwok runs), then untainted (node-lifecycle-controller).
	if err := kwok.poll(ctx, "Node "+NodeName+" Ready", func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := kcm.poll(ctx, "Node "+NodeName+" without taints", func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		return err == nil && len(n.Spec.Taints) == 0, nil
	}); err != nil {
		return nil, err
	}
	// The default ServiceAccount of namespace default: the controllers run.
	if err := kcm.poll(ctx, "ServiceAccount default/default", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func fakeNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": NodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    NodeCapacity.DeepCopy(),
			Allocatable: NodeCapacity.DeepCopy(),
		},
	}
}

// startProc starts tools/name with args, its output to dir/name.log.
func (c *Cluster) startProc(tools, name string, args ...string) (*proc, error) {
	p := &proc{name: name, log: filepath.Join(c.dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	defer f.Close()
	p.cmd = exec.Command(filepath.Join(tools, name), args...)
	p.cmd.Dir = c.dir
	p.cmd.Stdout = f
	p.cmd.Stderr = f
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubetest: starting %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// poll calls cond until it reports true, failing when ctx ends or the
// process exits; the error includes the tail of the process's log.
func (p *proc) poll(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("%s exited: %v", p.name, p.err)
		default:
		}
		return cond(ctx)
	})
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %v", startTimeout)
		}
		return fmt.Errorf("kubetest: waiting for %s: %w%s", what, err, logTail(p.name, p.log))
	}
	return nil
}

// waitHealthy waits for https://127.0.0.1:port/healthz to answer 200.
func (p *proc) waitHealthy(ctx context.Context, port int) error {
	hc := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			// A self-signed serving certificate; only liveness matters.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
		},
	}
	defer hc.CloseIdleConnections()
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	return p.poll(ctx, p.name+" healthz", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// stop ends the process: SIGTERM, SIGKILL after 5 seconds.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Stop stops every process and removes the temporary directory (logs,
// certificates, etcd's data; Main keeps the logs when a test failed, Start
// when it fails). It may be called more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, p := range c.procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.stop()
			}()
		}
		wg.Wait()
		if c.env != nil {
			if err := c.env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "kubetest: stopping etcd and kube-apiserver: %v\n", err)
			}
		}
		if c.keepLogs {
			// Everything but the logs goes (etcd's data, certificates).
			entries, _ := os.ReadDir(c.dir)
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), ".log") {
					_ = os.RemoveAll(filepath.Join(c.dir, e.Name()))
				}
			}
			fmt.Fprintf(os.Stderr, "kubetest: the control plane's logs are kept in %s\n", c.dir)
			return
		}
		if err := os.RemoveAll(c.dir); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		}
	})
}

// Main is a TestMain helper: it starts a cluster (installing crdPaths) into
// *c, runs the tests, stops the cluster and exits with the tests' code. When
// the tools are missing (see ToolsDir) the tests still run, on a Cluster
// that has none: each test that needs it ends in Cluster.Need (Namespace
// calls it), a skip, or a failure under EAS_REQUIRE_K8S=1 (package
// require), so every such test is reported as skipped or failed by name,
// and the tests that need no cluster run. When Start fails it exits 1. When
// a test fails the logs of the control plane are kept and their directory
// printed.
func Main(m *testing.M, c **Cluster, crdPaths ...string) {
	if _, err := ToolsDir(); err != nil {
		*c = &Cluster{missing: err}
		os.Exit(m.Run())
	}
	cl, err := Start(crdPaths...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*c = cl
	code := m.Run()
	cl.keepLogs = code != 0
	cl.Stop()
	os.Exit(code)
}

var notNameChar = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace named after the test (with a random
// suffix), waits for its default ServiceAccount (without which pods are
// refused) and deletes it when the test ends, without waiting for the
// deletion to finish.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	c.Need(t)
	base := strings.Trim(notNameChar.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	if base == "" {
		base = "test"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: base + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: creating namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("kubetest: deleting namespace %s: %v", ns.Name, err)
		}
	})
	err = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("kubetest: no default ServiceAccount in namespace %s: %v%s", ns.Name, err, c.LogTail("kube-controller-manager"))
	}
	return ns.Name
}

// LogTail returns the end of the log of one process of the cluster
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok),
// formatted to append to an error message.
func (c *Cluster) LogTail(name string) string {
	return logTail(name, filepath.Join(c.dir, name+".log"))
}

// logTail returns the last lines of a log file as "\n--- name log (tail) ---\n...".
func logTail(name, path string) string {
	const max = 4000
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("\n--- %s log: %v", name, err)
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return fmt.Sprintf("\n--- %s log (%s, tail) ---\n%s", name, path, bytes.TrimRight(b, "\n"))
}

// freePorts returns n distinct ports free on 127.0.0.1 now.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
