package appwatch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// syncTimeout bounds the first list of each namespace at start.
const syncTimeout = 2 * time.Minute

// InformerSet is how to watch one resource in some namespaces.
type InformerSet struct {
	Client   dynamic.Interface
	Resource schema.GroupVersionResource
	// Kind names the resource in messages: "Applications".
	Kind string
	// Hint says what to check when listing does not complete.
	Hint string
	// Tweak and Transform, when set, shape the lists and the objects kept.
	Tweak     dynamicinformer.TweakListOptionsFunc
	Transform cache.TransformFunc
	Logger    *slog.Logger
}

// Start runs an informer in each of namespaces ("*" is all of them) and
// waits, at most syncTimeout, until each has listed.
func (s InformerSet) Start(ctx context.Context, namespaces []string) ([]cache.SharedIndexInformer, error) {
	var informers []cache.SharedIndexInformer
	for _, ns := range namespaces {
		if ns == "*" {
			ns = metav1.NamespaceAll
		}
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.Client, 0, ns, s.Tweak)
		informer := factory.ForResource(s.Resource).Informer()
		if s.Transform != nil {
			if err := informer.SetTransform(s.Transform); err != nil {
				return nil, err
			}
		}
		_ = informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			s.Logger.Warn("watching "+s.Kind+" failed; retrying", "namespace", ns, "error", err)
		})
		informers = append(informers, informer)
		go informer.Run(ctx.Done())
	}
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for _, inf := range informers {
		if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("listing %s did not complete within 2 minutes: %s", s.Kind, s.Hint)
		}
	}
	return informers, nil
}
