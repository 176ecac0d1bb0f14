package kube

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// crdInstallHint is the command that installs the EASService CRD, named by
// every error that finds it missing.
const crdInstallHint = "install it with `eas-server k8s crd | kubectl apply -f -` (the Helm chart deploy/helm/eas-server installs it too)"

// CheckCRD says whether the API server serves EASServices. The controller
// checks it at start: without the CRD every create would fail later with
// the API server's "unable to retrieve the complete list of server APIs".
func CheckCRD(cfg *rest.Config) error {
	return checkServed(cfg, GroupVersion, "easservices")
}

// checkServed asks the API server's discovery whether gv has resource.
func checkServed(cfg *rest.Config, gv schema.GroupVersion, resource string) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	crd := resource + "." + gv.Group
	list, err := dc.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("controller: the cluster does not serve %s (the %s CustomResourceDefinition, version %s, is not installed): %s",
			gv.String(), crd, gv.Version, crdInstallHint)
	}
	if err != nil {
		return fmt.Errorf("controller: cannot ask the API server at %s which APIs it serves: %w", cfg.Host, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return nil
		}
	}
	return fmt.Errorf("controller: the cluster serves %s but not %s (the %s CustomResourceDefinition is out of date): %s",
		gv.String(), resource, crd, crdInstallHint)
}
