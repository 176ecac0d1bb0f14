package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/eas-server/eas-server/deploy"
	"github.com/eas-server/eas-server/internal/auth"
	"github.com/eas-server/eas-server/internal/kube"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/servicejson"
)

// podFlags are how the pods of services are made: shared by controller
// and k8s render.
type podFlags struct {
	namespace  string
	image      string
	pullPolicy string
	cachePVC   string
	ossSecret  string
	grace      time.Duration
	broker     string
}

func (f *podFlags) add(cmd *cobra.Command, defaultImage string) {
	fl := cmd.Flags()
	fl.StringVar(&f.namespace, "namespace", kube.DefaultNamespace(), "namespace of the services' objects; its default is $POD_NAMESPACE when set")
	fl.StringVar(&f.image, "image", defaultImage, "image the service pods run (built from deploy/Containerfile)")
	fl.StringVar(&f.pullPolicy, "image-pull-policy", "", "Always, IfNotPresent or Never (default: Kubernetes' rule for the tag)")
	fl.StringVar(&f.cachePVC, "cache-pvc", "", "PersistentVolumeClaim the pods share as their model cache, so they restart warm (default: an emptyDir per pod)")
	fl.StringVar(&f.ossSecret, "oss-secret", "", "Secret whose keys OSS_ACCESS_KEY_ID, OSS_ACCESS_KEY_SECRET, OSS_SESSION_TOKEN, OSS_ENDPOINT become the pods' environment")
	fl.StringVar(&f.broker, "queue-broker", "", "NATS JetStream server (nats://host:4222) the pods of asynchronous services keep their queues on, so that every pod serves the same queues (default: each pod's own)")
	fl.DurationVar(&f.grace, "shutdown-grace", 30*time.Second, "the pods' serve --shutdown-grace when a service.json gives no metadata.eas.termination_grace_period")
}

func (f *podFlags) options() (kube.Options, error) {
	switch corev1.PullPolicy(f.pullPolicy) {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return kube.Options{}, fmt.Errorf("--image-pull-policy: must be Always, IfNotPresent or Never, got %q", f.pullPolicy)
	}
	return kube.Options{Namespace: f.namespace, Image: f.image, ImagePullPolicy: corev1.PullPolicy(f.pullPolicy),
		CachePVC: f.cachePVC, OSSSecret: f.ossSecret, ShutdownGrace: f.grace, QueueBroker: f.broker}, nil
}

// clusterFlags are what controller and gateway share: where the API
// server is, where to listen, how to log.
type clusterFlags struct {
	kubeconfig, listen, logLevel, logFormat string
}

func (f *clusterFlags) add(cmd *cobra.Command, listenHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the pod's service account)")
	fl.StringVar(&f.listen, "listen", ":8080", listenHelp)
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text or json")
}

// open makes the logger, reads the API server's config and listens.
func (f *clusterFlags) open() (*slog.Logger, *rest.Config, net.Listener, error) {
	log, err := newLogger(f.logLevel, f.logFormat)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := kube.RestConfig(f.kubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--listen: %w", err)
	}
	return log, cfg, ln, nil
}

func controllerCmd() *cobra.Command {
	var (
		pf       podFlags
		cf       clusterFlags
		region   string
		maxModel int64
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run services on Kubernetes: the control plane API and the EASService reconcile loop",
		Long: "controller serves the same /api/v2/services API and CLI verbs as serve, but each service becomes\n" +
			"Kubernetes objects (an EASService, a Deployment of serve pods, a Service, ConfigMaps, a token\n" +
			"Secret, an HPA) in one namespace. The admin token comes from $" + auth.AdminTokenEnv + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pf.image == "" {
				return fmt.Errorf("--image: required: the image the service pods run (built from deploy/Containerfile)")
			}
			opt, err := pf.options()
			if err != nil {
				return err
			}
			log, cfg, ln, err := cf.open()
			if err != nil {
				return err
			}
			return kube.RunController(cmd.Context(), kube.ControllerConfig{
				Rest: cfg, Listener: ln, AdminToken: strings.TrimSpace(os.Getenv(auth.AdminTokenEnv)), Region: region,
				Options: opt, MaxModelBytes: maxModel, Log: log,
			})
		},
	}
	pf.add(cmd, "")
	cf.add(cmd, "address of the control plane API, /healthz and /readyz")
	fl := cmd.Flags()
	fl.StringVar(&region, "region", "", "region shown in service objects (default local)")
	fl.Int64Var(&maxModel, "max-model-size", processors.DefaultMaxModelBytes, "the model size bound create and modify check service.json against, as serve does")
	return cmd
}

func gatewayCmd() *cobra.Command {
	var (
		cf        clusterFlags
		namespace string
	)
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "One endpoint for every service on Kubernetes: proxies /api/predict/<name> to its pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, cfg, ln, err := cf.open()
			if err != nil {
				return err
			}
			return kube.RunGateway(cmd.Context(), kube.GatewayConfig{Rest: cfg, Listener: ln, Namespace: namespace, Log: log})
		},
	}
	cf.add(cmd, "address to serve on")
	cmd.Flags().StringVar(&namespace, "namespace", kube.DefaultNamespace(), "namespace of the services; its default is $POD_NAMESPACE when set")
	return cmd
}

func k8sCmd() *cobra.Command {
	root := &cobra.Command{Use: "k8s", Short: "Kubernetes tools: render a service.json as objects"}
	var pf podFlags
	var asEAS bool
	render := &cobra.Command{
		Use:   "render FILE",
		Short: "Print the Kubernetes objects of one service.json, without a cluster (for review or kubectl apply)",
		Long: "render prints, as YAML, the objects the controller would make for FILE: the token Secret, the\n" +
			"ConfigMap, the Service, the Deployment and (with an autoscaler) the HPA, to apply without the\n" +
			"controller. With --easservice it prints the EASService to apply where the controller runs.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := servicejson.ParseFile(args[0])
			if err != nil {
				return fmt.Errorf("%s:\n%w", args[0], err)
			}
			for _, w := range kube.LocalPathWarnings(spec) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", args[0], w)
			}
			if asEAS {
				es, err := kube.RenderEASService(spec, pf.namespace)
				if err != nil {
					return err
				}
				return kube.WriteYAML(cmd.OutOrStdout(), es)
			}
			opt, err := pf.options()
			if err != nil {
				return err
			}
			objs, err := kube.RenderStandalone(spec, opt)
			if err != nil {
				return err
			}
			return kube.WriteYAML(cmd.OutOrStdout(), objs...)
		},
	}
	pf.add(render, "eas-server:latest")
	render.Flags().BoolVar(&asEAS, "easservice", false, "print the EASService (for a cluster where eas-server controller runs) instead of the objects")
	root.AddCommand(render)
	root.AddCommand(&cobra.Command{
		Use:   "crd",
		Short: "Print the EASService CustomResourceDefinition the controller needs (eas-server k8s crd | kubectl apply -f -)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(deploy.CRD())
			return err
		},
	})
	return root
}
