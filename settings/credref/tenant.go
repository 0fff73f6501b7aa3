package credref

import (
	"fmt"

	"github.com/image-updater/argocd-image-updater/internal/tenant"
)

// Whoever may edit an Application's annotations (or an ImageUpdater) is a
// tenant, trusted less than the operator who runs the controller and
// writes registries.conf. What a tenant names is checked here, before any
// request: registries.conf is not limited, its references are the
// operator's.

// TenantMay says whether settings written in namespace, a tenant's, may
// name ref. A Secret must be in that namespace: the credentials go to
// whatever registry the same settings name, so a Secret elsewhere (an Argo
// CD cluster Secret, another team's pull secret) would leak there. env:
// and ext: reach the controller's own environment and programs, which
// only settings in the controller's namespace, the operator's, may use; so
// do roles for ecr:<role ARN>, which the pod's identity may assume but a
// tenant must not choose. Plain ecr, gcp and azure are the pod's cloud
// identity, which their sources only send to that cloud's registries; an
// image at such a host gets them without asking.
func (r Ref) TenantMay(namespace, controllerNamespace string) error {
	switch r.Kind {
	case KindPullSecret, KindSecret:
		if err := tenant.MayNameSecret(r.String(), r.Namespace, namespace); err != nil {
			return fmt.Errorf("%w (copy the Secret there, or give the registry's credentials in registries.conf)", err)
		}
	case KindEnv, KindExt, KindECR:
		if r.Kind == KindECR && r.RoleARN == "" {
			return nil
		}
		if controllerNamespace == "" {
			return fmt.Errorf("%s: credentials may only be named by Applications in the controller's namespace, and the controller was given none", r.Kind)
		}
		if namespace != controllerNamespace {
			return fmt.Errorf("%s: credentials may only be named by Applications in the controller's namespace (%s); this Application is in %s (give the registry's credentials in registries.conf, or use a pullsecret: or secret: reference to a Secret in %s)",
				r.Kind, controllerNamespace, namespace, namespace)
		}
	}
	return nil
}
