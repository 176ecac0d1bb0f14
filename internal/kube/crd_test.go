package kube

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCRDCheck: the installed CRD passes; a group or resource the cluster
// does not serve is refused with a message naming the CRD and the command
// that installs it.
func TestCRDCheck(t *testing.T) {
	cluster.Need(t)
	if err := CheckCRD(cluster.Config); err != nil {
		t.Fatalf("installed CRD refused: %v", err)
	}
	for _, c := range []struct {
		gv       schema.GroupVersion
		resource string
		want     string
	}{
		{schema.GroupVersion{Group: "absent.eas-server.io", Version: "v1alpha1"}, "easservices", "easservices.absent.eas-server.io CustomResourceDefinition, version v1alpha1, is not installed"},
		{GroupVersion, "nothings", "serves eas-server.io/v1alpha1 but not nothings"},
	} {
		err := checkServed(cluster.Config, c.gv, c.resource)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "eas-server k8s crd | kubectl apply -f -") {
			t.Errorf("%s %s: %v, want %q and the install command", c.gv, c.resource, err, c.want)
		}
	}
}
