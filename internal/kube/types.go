// Package kube is the Kubernetes backend of eas-server: each service
// becomes an EASService object whose spec is its service.json, and one
// reconcile loop turns that into a Deployment of `eas-server serve` pods,
// a Service, a ConfigMap per version, a token Secret and, when the
// service.json has an autoscaler, a HorizontalPodAutoscaler. The control
// plane API (Backend) and kubectl are two doors to that one loop
// (docs/kubernetes.md).
package kube

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The EASService API: group, version and kind, as the CRD declares them.
const (
	Group   = "eas-server.io"
	Version = "v1alpha1"
	Kind    = "EASService"
)

// GroupVersion is eas-server.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// EASService is one service: its spec is the service.json, as a user would
// deploy it on one machine.
type EASService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the service.json object, token included when the user put
	// one there (the control plane API keeps tokens in the Secret only).
	Spec   json.RawMessage `json:"spec,omitempty"`
	Status Status          `json:"status,omitempty"`
}

// objectName is the name of the service's Deployment, Service and HPA
// (ObjectName of its service; ParseSpec holds the two names together).
func (in *EASService) objectName() string { return "eas-" + in.Name }

// Status is what the controller writes back.
type Status struct {
	// Status is the EAS status word: Creating, Running, Updating, Waiting,
	// Failed, Stopping or Stopped.
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// CurrentVersion is the version the pods run (or will, once ready):
	// the generation of the spec it was made from.
	CurrentVersion     int64              `json:"currentVersion,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Replicas           int32              `json:"replicas"`
	ReadyReplicas      int32              `json:"readyReplicas"`
	UpdatedReplicas    int32              `json:"updatedReplicas"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// EASServiceList is a list of EASService.
type EASServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EASService `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (in *EASService) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy returns a copy sharing nothing with in.
func (in *EASService) DeepCopy() *EASService {
	if in == nil {
		return nil
	}
	out := &EASService{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec != nil {
		out.Spec = append(json.RawMessage(nil), in.Spec...)
	}
	out.Status = in.Status
	if in.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *EASServiceList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &EASServiceList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]EASService, len(in.Items))
		for i := range in.Items {
			out.Items[i] = *in.Items[i].DeepCopy()
		}
	}
	return out
}

// AddToScheme registers EASService and EASServiceList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &EASService{}, &EASServiceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
