package healthgate

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	api "github.com/image-updater/argocd-image-updater/api/v1alpha1"
	"github.com/image-updater/argocd-image-updater/application"
	"github.com/image-updater/argocd-image-updater/settings"
)

// Annotation keys of the gate, with the prefix.
const (
	StateAnnotation = settings.AnnotationPrefix + settings.KeyHealthGateState
	ClearAnnotation = settings.AnnotationPrefix + settings.KeyHealthGateClear
	// RollbackHoldAnnotation "false" turns off holding a version someone
	// else rolled back.
	RollbackHoldAnnotation = settings.AnnotationPrefix + settings.KeyRollbackHold
)

// fieldManager names the controller's writes, as the argocd write-back's.
const fieldManager = "argocd-image-updater"

// store keeps the gate's states where they survive a restart.
type store interface {
	// saveAnnotation sets the state annotation of an Application; ""
	// removes it.
	saveAnnotation(ctx context.Context, app types.NamespacedName, value string) error
	// saveStatus sets the health gate's lists of an ImageUpdater's status.
	saveStatus(ctx context.Context, iu types.NamespacedName, records []api.HealthGateRecord, skipped []api.SkippedVersion) error
	// removeClear removes the health-gate-clear annotation of an
	// Application if it still holds value.
	removeClear(ctx context.Context, app types.NamespacedName, value string) error
}

// kubeStore is the store of the API server.
type kubeStore struct{ client dynamic.Interface }

func (k kubeStore) saveAnnotation(ctx context.Context, app types.NamespacedName, value string) error {
	var v any
	if value != "" {
		v = value
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{StateAnnotation: v}}})
	if err != nil {
		return err
	}
	_, err = k.client.Resource(application.Resource()).Namespace(app.Namespace).
		Patch(ctx, app.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotation %s of Application %s: %w", StateAnnotation, app, err)
	}
	return nil
}

func (k kubeStore) saveStatus(ctx context.Context, iu types.NamespacedName, records []api.HealthGateRecord, skipped []api.SkippedVersion) error {
	// A merge patch replaces the two lists whole and nothing else of the
	// status; null removes an empty one.
	status := map[string]any{"healthGate": nil, "skippedVersions": nil}
	if len(records) > 0 {
		status["healthGate"] = records
	}
	if len(skipped) > 0 {
		status["skippedVersions"] = skipped
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = k.client.Resource(api.Resource()).Namespace(iu.Namespace).
		Patch(ctx, iu.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("status of ImageUpdater %s: %w", iu, err)
	}
	return nil
}

func (k kubeStore) removeClear(ctx context.Context, app types.NamespacedName, value string) error {
	path := application.AnnotationPath(ClearAnnotation)
	body, err := json.Marshal([]map[string]any{{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}})
	if err != nil {
		return err
	}
	_, err = k.client.Resource(application.Resource()).Namespace(app.Namespace).
		Patch(ctx, app.Name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	// A failed test means a person changed the value since: it is read
	// again.
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("annotation %s of Application %s: %w", ClearAnnotation, app, err)
	}
	return nil
}
