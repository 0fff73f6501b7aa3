package cycle

import (
	"fmt"

	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/registry/credentials"
	"github.com/image-updater/argocd-image-updater/settings"
)

// Whoever may edit an Application's annotations is trusted less than the
// operator who runs the controller and writes registries.conf. What the
// annotations name is checked here, before any request: registries.conf
// is not limited, its references are the operator's.

// checkImageCredentials says whether an Application's annotations may name
// ref. A Secret must be in the Application's own namespace: the
// credentials go to whatever registry the same annotations name, so a
// Secret elsewhere (an Argo CD cluster Secret, another team's pull secret)
// would leak there. env: and ext: reach the controller's own environment
// and programs, which only Applications in the controller's namespace,
// the operator's, may use; so do roles for ecr:<role ARN>, which the pod's
// identity may assume but a tenant must not choose. Plain ecr, gcp and
// azure are the pod's cloud identity, which their sources only send to
// that cloud's registries; an image at such a host gets them without
// asking.
func checkImageCredentials(app *application.Application, ref credentials.Ref, controllerNamespace string) error {
	switch ref.Kind {
	case credentials.KindPullSecret, credentials.KindSecret:
		return checkSecretNamespace(app, ref.String(), ref.Namespace)
	case credentials.KindEnv, credentials.KindExt, credentials.KindECR:
		if ref.Kind == credentials.KindECR && ref.RoleARN == "" {
			return nil
		}
		if controllerNamespace == "" {
			return fmt.Errorf("%s: credentials may only be named by Applications in the controller's namespace, and the controller was given none", ref.Kind)
		}
		if app.Namespace != controllerNamespace {
			return fmt.Errorf("%s: credentials may only be named by Applications in the controller's namespace (%s); this Application is in %s (give the registry's credentials in registries.conf, or use a pullsecret: or secret: reference to a Secret in %s)",
				ref.Kind, controllerNamespace, app.Namespace, app.Namespace)
		}
	}
	return nil
}

// checkSecretNamespace says whether an Application's annotations may name
// a Secret in namespace; what is the reference as written.
func checkSecretNamespace(app *application.Application, what, namespace string) error {
	if namespace == app.Namespace {
		return nil
	}
	return fmt.Errorf("%s names a Secret in namespace %s; an Application's annotations may name only Secrets in the Application's own namespace, %s (copy the Secret there, or give the registry's credentials in registries.conf)",
		what, namespace, app.Namespace)
}

// writeBackProblem checks the Secret of write-back-method git:secret:, whose
// credentials go to the repository the annotations name.
func writeBackProblem(app *application.Application) (settings.Problem, bool) {
	s := app.GitSecret()
	if s.Name == "" {
		return settings.Problem{}, false
	}
	err := checkSecretNamespace(app, "git:secret:"+s.Namespace+"/"+s.Name, s.Namespace)
	if err == nil {
		return settings.Problem{}, false
	}
	return settings.Problem{Origin: app.Settings.WriteBack.MethodOrigin.Or(settings.AnnotationOrigin(settings.KeyWriteBackMethod)), Message: err.Error()}, true
}
