package main

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/image-updater/argocd-image-updater/webhook"
)

func leaseHeldBy(holder string, renewed time.Time, annotation string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	if annotation != "" {
		l.Annotations = map[string]string{relayAnnotation: annotation}
	}
	return l
}

// What a replica makes of the Lease it reads: the leader and its
// address, when the address is the holder's own and the Lease is renewed.
func TestLeaseObserverLeader(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ad = `{"holder":"b","url":"http://10.0.0.6:8082"}`
	tests := []struct {
		name   string
		leases []*coordinationv1.Lease // read one second apart
		after  time.Duration           // from the last read
		want   webhook.Leader
	}{
		{name: "another replica leads", leases: []*coordinationv1.Lease{leaseHeldBy("b", t0, ad)},
			want: webhook.Leader{Known: true, URL: "http://10.0.0.6:8082"}},
		{name: "it advertises no address", leases: []*coordinationv1.Lease{leaseHeldBy("b", t0, "")},
			want: webhook.Leader{Known: true}},
		{name: "the address of a holder before", leases: []*coordinationv1.Lease{leaseHeldBy("c", t0, ad)},
			want: webhook.Leader{Known: true}},
		{name: "not an address", leases: []*coordinationv1.Lease{leaseHeldBy("b", t0, "10.0.0.6")},
			want: webhook.Leader{Known: true}},
		{name: "nobody holds it", leases: []*coordinationv1.Lease{leaseHeldBy("", t0, ad)}},
		{name: "this replica holds it", leases: []*coordinationv1.Lease{leaseHeldBy("a", t0, `{"holder":"a","url":"http://10.0.0.5:8082"}`)}},
		{name: "renewed", leases: []*coordinationv1.Lease{leaseHeldBy("b", t0, ad), leaseHeldBy("b", t0.Add(2*time.Second), ad)},
			after: leaseDuration - time.Second, want: webhook.Leader{Known: true, URL: "http://10.0.0.6:8082"}},
		{name: "not renewed for leaseDuration", leases: []*coordinationv1.Lease{leaseHeldBy("b", t0, ad), leaseHeldBy("b", t0, ad)},
			after: leaseDuration - time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			o := &leaseObserver{id: "a", now: func() time.Time { return now }}
			for _, l := range tt.leases {
				o.observe(l)
				now = now.Add(time.Second)
			}
			now = now.Add(tt.after)
			if got := o.leader(); got != tt.want {
				t.Errorf("leader() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The address goes on the Lease only in a write that names this replica
// holder; any other write takes it off.
func TestLeaseObserverStamp(t *testing.T) {
	o := &leaseObserver{id: "a", now: time.Now}
	o.advertise("http://10.0.0.5:8082")
	const before = `{"holder":"b","url":"http://10.0.0.6:8082"}`
	held := leaseHeldBy("a", time.Now(), before)
	if got, want := o.stamp(held).Annotations[relayAnnotation], `{"holder":"a","url":"http://10.0.0.5:8082"}`; got != want {
		t.Errorf("renewal: %q, want %q", got, want)
	}
	if held.Annotations[relayAnnotation] != before {
		t.Error("the Lease passed in was changed")
	}
	for name, l := range map[string]*coordinationv1.Lease{
		"release":       leaseHeldBy("", time.Now(), `{"holder":"a","url":"http://10.0.0.5:8082"}`),
		"another holds": leaseHeldBy("b", time.Now(), `{"holder":"a","url":"http://10.0.0.5:8082"}`),
	} {
		if got, ok := o.stamp(l).Annotations[relayAnnotation]; ok {
			t.Errorf("%s: %q left on the Lease", name, got)
		}
	}
	o.advertise("")
	if got, ok := o.stamp(held).Annotations[relayAnnotation]; ok {
		t.Errorf("without an address: %q left on the Lease", got)
	}
}

func TestRelayURL(t *testing.T) {
	tests := []struct {
		podIP, listen string
		tls           bool
		want          string
	}{
		{podIP: "10.0.0.5", want: "http://10.0.0.5:8082"},
		{podIP: "10.0.0.5", tls: true, want: "https://10.0.0.5:8082"},
		{podIP: "fd00::5", listen: "::", want: "http://[fd00::5]:8082"},
		{podIP: "10.0.0.5", listen: "0.0.0.0", want: "http://10.0.0.5:8082"},
		{podIP: "10.0.0.5", listen: "10.0.0.5", want: "http://10.0.0.5:8082"},
		{podIP: "10.0.0.5", listen: "127.0.0.1"},
		{podIP: "10.0.0.5", listen: "localhost"},
		{podIP: ""},
		{podIP: "pod.example"},
	}
	for _, tt := range tests {
		if got := relayURL(tt.podIP, tt.listen, 8082, tt.tls); got != tt.want {
			t.Errorf("relayURL(%q, %q, %v) = %q, want %q", tt.podIP, tt.listen, tt.tls, got, tt.want)
		}
	}
}
