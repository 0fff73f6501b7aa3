package main

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// eventDelivery records Kubernetes events through client-go's broadcaster
// and, unlike the broadcaster alone, lets the controller wait until each
// event recorded has reached the API server before it exits: the
// broadcaster hands events to the API server on a goroutine of its own,
// and its Shutdown drops what that goroutine has not sent yet.
type eventDelivery struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// recorded counts the events recorded, sent the calls to the API
	// server that ended (an event aggregated with an earlier one is a
	// patch, still one call); the broadcaster's spam filter, which skips
	// an event only after a burst of 25 on one object, is the rare case
	// where sent stays behind and wait runs out its time.
	recorded, sent atomic.Int64
}

func newEventDelivery(cs kubernetes.Interface) *eventDelivery {
	d := &eventDelivery{broadcaster: record.NewBroadcaster()}
	d.broadcaster.StartRecordingToSink(&countingSink{EventSinkImpl: typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")}, sent: &d.sent})
	d.recorder = &countingRecorder{EventRecorder: d.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "argocd-image-updater"}), recorded: &d.recorded}
	return d
}

// Close waits until every event recorded was sent, or ctx ends, then stops
// the broadcaster.
func (d *eventDelivery) Close(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for d.sent.Load() < d.recorded.Load() {
		select {
		case <-ctx.Done():
			d.broadcaster.Shutdown()
			return
		case <-tick.C:
		}
	}
	d.broadcaster.Shutdown()
}

type countingRecorder struct {
	record.EventRecorder
	recorded *atomic.Int64
}

func (r *countingRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.recorded.Add(1)
	r.EventRecorder.Event(object, eventtype, reason, message)
}

func (r *countingRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.recorded.Add(1)
	r.EventRecorder.Eventf(object, eventtype, reason, messageFmt, args...)
}

func (r *countingRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.recorded.Add(1)
	r.EventRecorder.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}

type countingSink struct {
	typedcorev1.EventSinkImpl
	sent *atomic.Int64
}

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	defer s.sent.Add(1)
	return s.EventSinkImpl.Create(e)
}

func (s *countingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	defer s.sent.Add(1)
	return s.EventSinkImpl.Update(e)
}

func (s *countingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	defer s.sent.Add(1)
	return s.EventSinkImpl.Patch(e, data)
}
