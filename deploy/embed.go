// Package deploy holds what installs eas-server on Kubernetes: the Helm chart
// (helm/eas-server) and, in it, the one copy of the EASService
// CustomResourceDefinition, which this package embeds so that the Go code and
// its tests use the very file the chart installs.
package deploy

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// CRDPath is the CRD file's path relative to the repository root.
const CRDPath = "deploy/helm/eas-server/crds/easservices.yaml"

//go:embed helm/eas-server/crds/easservices.yaml
var crd []byte

// CRD returns the EASService CustomResourceDefinition (YAML, apiextensions.k8s.io/v1).
// The caller must not modify the slice.
func CRD() []byte { return crd }

// CRDFile returns the absolute path of the CRD file in the source tree, found
// from the working directory upwards (a test's working directory is its
// package's folder), for tools that take a file, such as the test API server.
func CRDFile() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		p := filepath.Join(dir, filepath.FromSlash(CRDPath))
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("deploy: %s not found in %s or above", CRDPath, wd)
		}
		dir = parent
	}
}
