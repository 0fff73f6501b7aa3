// Package v1alpha1 is the ImageUpdater resource of the
// argocd-image-updater.argoproj.io API group: the schema users of the
// resource-based Argo CD Image Updater already apply.
//
// +kubebuilder:object:generate=true
// +groupName=argocd-image-updater.argoproj.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the resource.
	GroupVersion = schema.GroupVersion{Group: "argocd-image-updater.argoproj.io", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource is the ImageUpdater resource, for dynamic clients.
func Resource() schema.GroupVersionResource { return GroupVersion.WithResource("imageupdaters") }

func init() {
	SchemeBuilder.Register(&ImageUpdater{}, &ImageUpdaterList{})
}
