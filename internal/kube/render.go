package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/eas-server/eas-server/internal/storage"
	"github.com/eas-server/eas-server/servicejson"
)

// Labels and annotations on every object of a service.
const (
	LabelService   = "eas-server.io/service" // the object name of the service (ObjectName less "eas-")
	LabelVersion   = "eas-server.io/version" // on pods and version ConfigMaps
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "eas-server"
	// AnnotationStopped on an EASService scales its Deployment to 0 (stop);
	// removing it scales back (start).
	AnnotationStopped = "eas-server.io/stopped"
	// AnnotationServiceName keeps the EAS name (with its underscores) on
	// objects whose Kubernetes names use dashes.
	AnnotationServiceName = "eas-server.io/service-name"
	// annotationTokenGeneration on the token Secret counts its tokens; the
	// pod template carries it so that a new token rolls the pods.
	annotationTokenGeneration = "eas-server.io/token-generation"
)

// Where the pods keep things. The paths are what the rendered args name;
// TestPodTemplateRuns maps them to temporary folders.
const (
	ConfigDir   = "/etc/eas/service"
	ConfigFile  = "service.json"
	TokenDir    = "/etc/eas/token"
	TokenKey    = "token"
	StateDir    = "/var/lib/eas"
	CacheDir    = StateDir + "/cache"
	HTTPPort    = 8080
	GRPCPort    = 8081
	preStopWait = 5 * time.Second // the endpoints controller's and proxies' time to drop the pod
	// shutdownDelay is serve --shutdown-delay: /readyz answers 503 while
	// requests are still served, after preStopWait.
	shutdownDelay = 5 * time.Second
	// podUID is the non-root user the image runs as (deploy/Containerfile).
	podUID = 65532
)

// QPSMetric is the per-pod metric the HPA reads for a qps strategy: the
// rate of eas_requests_total, served through the custom metrics API by an
// adapter (docs/kubernetes.md shows the prometheus-adapter rule).
const QPSMetric = "eas_requests_per_second"

// Options is what the controller adds to a service.json to make pods.
type Options struct {
	Namespace       string
	Image           string            // the eas-server image the pods run
	ImagePullPolicy corev1.PullPolicy // "" = Kubernetes' default
	// CachePVC names a PersistentVolumeClaim mounted as the model cache,
	// shared by the pods (fetches are coordinated by file locks), so they
	// restart warm; "" = an emptyDir per pod.
	CachePVC string
	// OSSSecret names a Secret whose keys (OSS_ACCESS_KEY_ID,
	// OSS_ACCESS_KEY_SECRET, OSS_SESSION_TOKEN, OSS_ENDPOINT) become the
	// pods' environment; "" = none.
	OSSSecret string
	// ShutdownGrace is serve --shutdown-grace when the service.json gives
	// no metadata.eas.termination_grace_period.
	ShutdownGrace time.Duration
	// QueueBroker is serve --queue-broker for asynchronous services: their
	// queues on a NATS JetStream server every pod reaches, so that the
	// pods share them ("" = each pod's own, in its emptyDir).
	QueueBroker string
}

// Objects are the Kubernetes objects of one version of a service.
type Objects struct {
	ConfigMap  *corev1.ConfigMap
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	HPA        *autoscalingv2.HorizontalPodAutoscaler // nil without an autoscaler
}

// ObjectName is the name of a service's Deployment, Service and HPA:
// "eas-" and the EAS name with its underscores as dashes (Kubernetes names
// have no underscores; EAS names have no dashes, so no two services share
// one). Names that cannot be a DNS label are refused with why.
func ObjectName(name string) (string, error) {
	base := strings.ReplaceAll(name, "_", "-")
	obj := "eas-" + base
	if strings.HasSuffix(base, "-") {
		return "", fmt.Errorf("name: %q ends with an underscore, which a Kubernetes object name cannot (it becomes %q); drop the trailing underscore", name, obj)
	}
	if errs := validation.IsDNS1035Label(obj); len(errs) > 0 {
		return "", fmt.Errorf("name: %q cannot name Kubernetes objects (%q: %s); use at most %d characters", name, obj, strings.Join(errs, "; "), validation.DNS1035LabelMaxLength-len("eas-"))
	}
	return obj, nil
}

// ResourceName is the EASService's own name for a service: ObjectName
// less "eas-".
func ResourceName(name string) (string, error) {
	obj, err := ObjectName(name)
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(obj, "eas-"), nil
}

// ConfigMapName is the ConfigMap of one version.
func ConfigMapName(obj string, version int64) string {
	return obj + "-v" + strconv.FormatInt(version, 10)
}

// TokenSecretName is the Secret holding the service's token.
func TokenSecretName(obj string) string { return obj + "-token" }

// selectorLabels select a service's pods; they never change.
func selectorLabels(obj string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelService: strings.TrimPrefix(obj, "eas-")}
}

// objectMeta is the metadata every object of the service name carries;
// object is the object's own name.
func objectMeta(name, object, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: object, Namespace: ns,
		Labels:      selectorLabels("eas-" + strings.ReplaceAll(name, "_", "-")),
		Annotations: map[string]string{AnnotationServiceName: name},
	}
}

// StripToken returns the service.json without its top-level "token" and
// "generate_token": what a ConfigMap and the version history may hold.
// Keys come out sorted.
func StripToken(raw []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("service.json: %w", err)
	}
	delete(m, "token")
	delete(m, "generate_token")
	return json.MarshalIndent(m, "", "  ")
}

// Render makes the objects of version of the service spec (parsed from
// EASService.Spec). replicas is the Deployment's count: metadata.instance,
// 0 when stopped, or the count an HPA has set.
func Render(spec *servicejson.Service, version int64, replicas int32, opt Options) (*Objects, error) {
	obj, err := ObjectName(spec.Name)
	if err != nil {
		return nil, err
	}
	if opt.Image == "" {
		return nil, fmt.Errorf("no image for the pods: start the controller with --image (an image built from deploy/Containerfile)")
	}
	config, err := StripToken(spec.Raw)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: objectMeta(spec.Name, ConfigMapName(obj, version), opt.Namespace),
		Data:       map[string]string{ConfigFile: string(config)},
	}
	cm.Labels[LabelVersion] = strconv.FormatInt(version, 10)

	grace := opt.ShutdownGrace
	if spec.Metadata.TerminationGracePeriod > 0 {
		grace = spec.Metadata.TerminationGracePeriod
	}
	if grace <= 0 {
		grace = 30 * time.Second
	}
	args := []string{
		"serve",
		"--listen", fmt.Sprintf(":%d", HTTPPort),
		"--state-dir", StateDir,
		"--deploy", ConfigDir + "/" + ConfigFile,
		"--token-file", TokenDir + "/" + TokenKey,
		"--no-control-plane",
		"--shutdown-delay", shutdownDelay.String(),
		"--shutdown-grace", grace.String(),
		"--log-format", "json",
	}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP}}
	svcPorts := []corev1.ServicePort{{Name: "http", Port: HTTPPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}
	if spec.IsAsync() && opt.QueueBroker != "" {
		args = append(args, "--queue-broker", opt.QueueBroker)
	}
	if spec.Metadata.EnableGRPC {
		args = append(args, "--grpc-listen", fmt.Sprintf(":%d", GRPCPort))
		ports = append(ports, corev1.ContainerPort{Name: "grpc", ContainerPort: GRPCPort, Protocol: corev1.ProtocolTCP})
		svcPorts = append(svcPorts, corev1.ServicePort{Name: "grpc", Port: GRPCPort, TargetPort: intstr.FromString("grpc"), Protocol: corev1.ProtocolTCP})
	}

	container := corev1.Container{
		Name:            "serve",
		Image:           opt.Image,
		ImagePullPolicy: opt.ImagePullPolicy,
		Args:            args,
		Ports:           ports,
		Resources:       resources(spec.Metadata),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
			PeriodSeconds: 5, TimeoutSeconds: 3, FailureThreshold: 2,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 6,
		},
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Sleep: &corev1.SleepAction{Seconds: int64(preStopWait / time.Second)},
		}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "service", MountPath: ConfigDir, ReadOnly: true},
			{Name: "token", MountPath: TokenDir, ReadOnly: true},
			{Name: "state", MountPath: StateDir},
			{Name: "cache", MountPath: CacheDir},
			{Name: "tmp", MountPath: "/tmp"},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			ReadOnlyRootFilesystem:   new(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	if opt.OSSSecret != "" {
		container.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: opt.OSSSecret}}}}
	}
	cache := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	if opt.CachePVC != "" {
		cache = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: opt.CachePVC}}
	}
	// The pods drain in this order: preStop (endpoints drop the pod), the
	// shutdown delay (503 on /readyz, still serving), then up to grace for
	// queued requests; the kubelet's SIGKILL comes after all of it.
	termination := int64((preStopWait+shutdownDelay+grace)/time.Second) + 10

	podLabels := selectorLabels(obj)
	podLabels[LabelVersion] = strconv.FormatInt(version, 10)
	maxSurge, maxUnavailable := intstr.FromInt32(1), intstr.FromInt32(0)
	if rs := spec.Metadata.RollingStrategy; rs.MaxSurge != nil {
		maxSurge = intOrPercent(*rs.MaxSurge)
	}
	if rs := spec.Metadata.RollingStrategy; rs.MaxUnavailable != nil {
		maxUnavailable = intOrPercent(*rs.MaxUnavailable)
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: objectMeta(spec.Name, obj, opt.Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(obj)},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable},
			},
			RevisionHistoryLimit: new(int32(10)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      podLabels,
					Annotations: map[string]string{AnnotationServiceName: spec.Name},
				},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{container},
					TerminationGracePeriodSeconds: &termination,
					AutomountServiceAccountToken:  new(false),
					EnableServiceLinks:            new(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: new(true),
						RunAsUser:    new(int64(podUID)),
						RunAsGroup:   new(int64(podUID)),
						FSGroup:      new(int64(podUID)),
					},
					Volumes: []corev1.Volume{
						{Name: "service", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
						}}},
						{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: TokenSecretName(obj), DefaultMode: new(int32(0o440)),
						}}},
						{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "cache", VolumeSource: cache},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(spec.Name, obj, opt.Namespace),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selectorLabels(obj),
			Ports:    svcPorts,
		},
	}
	out := &Objects{ConfigMap: cm, Deployment: dep, Service: svc}
	if a := spec.Autoscaler; a != nil {
		out.HPA = hpa(spec.Name, obj, opt.Namespace, a)
	}
	return out, nil
}

// resources turns metadata.cpu (cores), memory (MB) and gpu into equal
// requests and limits (the Guaranteed QoS class, as EAS sizes instances).
func resources(m servicejson.Metadata) corev1.ResourceRequirements {
	list := corev1.ResourceList{}
	if m.CPU > 0 {
		list[corev1.ResourceCPU] = *resource.NewQuantity(int64(m.CPU), resource.DecimalSI)
	}
	if m.Memory > 0 {
		list[corev1.ResourceMemory] = *resource.NewQuantity(int64(m.Memory)<<20, resource.BinarySI)
	}
	if m.GPU > 0 {
		list["nvidia.com/gpu"] = *resource.NewQuantity(int64(m.GPU), resource.DecimalSI)
	}
	if len(list) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: list.DeepCopy(), Limits: list}
}

func intOrPercent(v servicejson.IntOrPercent) intstr.IntOrString {
	if v.Percent {
		return intstr.FromString(v.String())
	}
	return intstr.FromInt32(int32(v.Value))
}

// hpa turns the autoscaler section into an autoscaling/v2 HPA: cpu as a
// Resource metric (percent of the requested CPU), qps as a Pods metric
// (QPSMetric, per pod).
func hpa(name, obj, ns string, a *servicejson.Autoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: objectMeta(name, obj, ns),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: obj},
			MinReplicas:    new(int32(a.Min)),
			MaxReplicas:    int32(a.Max),
		},
	}
	for _, st := range a.Strategies {
		switch st.Metric {
		case servicejson.MetricCPU:
			h.Spec.Metrics = append(h.Spec.Metrics, autoscalingv2.MetricSpec{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(int32(st.Threshold))},
				},
			})
		case servicejson.MetricQPS:
			q := resource.MustParse(strconv.FormatFloat(st.Threshold, 'f', -1, 64))
			h.Spec.Metrics = append(h.Spec.Metrics, autoscalingv2.MetricSpec{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: QPSMetric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
				},
			})
		}
	}
	if a.ScaleUpWindow != nil || a.ScaleDownWindow != nil {
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
		if a.ScaleUpWindow != nil {
			h.Spec.Behavior.ScaleUp = &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: new(int32(*a.ScaleUpWindow / time.Second))}
		}
		if a.ScaleDownWindow != nil {
			h.Spec.Behavior.ScaleDown = &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: new(int32(*a.ScaleDownWindow / time.Second))}
		}
	}
	return h
}

// LocalPathWarnings says which of spec's model files are paths on the
// machine that wrote the service.json (a local path or a file:// URL): the
// pods resolve them in their own file system, where they exist only when
// the image or a volume puts them there. Render does not refuse them (an
// image may carry its model), but whoever renders should know.
func LocalPathWarnings(spec *servicejson.Service) []string {
	var out []string
	for _, f := range []struct{ key, loc string }{
		{"model_path", spec.ModelPath}, {"processor_path", spec.ProcessorPath}, {"warm_up_data_path", spec.WarmUpDataPath},
	} {
		if path, local := storage.LocalPath(f.loc); f.loc != "" && local {
			out = append(out, fmt.Sprintf("%s %q is a path on this machine: the pods look for it in their own file system, "+
				"where it exists only if the image or a volume puts it there; give an oss:// or http(s):// URL the pods can fetch", f.key, path))
		}
	}
	return out
}
