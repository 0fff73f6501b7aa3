package firstseen

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// DefaultConfigMap is the ConfigMap of the controller's namespace that
// holds the times.
const DefaultConfigMap = "argocd-image-updater-first-seen"

// dataKey is the ConfigMap's key holding them, as JSON.
const dataKey = "first-seen.json"

// ConfigMap keeps the times in the ConfigMap name of configMaps' namespace.
type ConfigMap struct {
	ConfigMaps corev1client.ConfigMapInterface
	Name       string
}

// Load reads the ConfigMap, created empty when there is none: the
// controller's first start creates it, so that a save only updates it.
func (c ConfigMap) Load(ctx context.Context) ([]byte, error) {
	cm, err := c.ConfigMaps.Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.ConfigMaps.Create(ctx, c.object("{}"), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if v, ok := cm.Data[dataKey]; ok {
		return []byte(v), nil
	}
	return nil, nil
}

// Save writes the ConfigMap, created when there is none; a write that
// meets another is done again on what that one wrote.
func (c ConfigMap) Save(ctx context.Context, data func(stored []byte) ([]byte, error)) error {
	for attempt := 0; ; attempt++ {
		cm, err := c.ConfigMaps.Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out, err := data(nil)
			if err != nil {
				return err
			}
			_, err = c.ConfigMaps.Create(ctx, c.object(string(out)), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) && attempt < 3 {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		var old []byte
		if v, ok := cm.Data[dataKey]; ok {
			old = []byte(v)
		}
		out, err := data(old)
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[dataKey] = string(out)
		_, err = c.ConfigMaps.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		return err
	}
}

func (c ConfigMap) object(data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: map[string]string{"app.kubernetes.io/part-of": "argocd-image-updater"}},
		Data: map[string]string{dataKey: data}}
}
