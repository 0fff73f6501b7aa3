package main

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/image-updater/argocd-image-updater/webhook"
)

// relayAnnotation, on the leader Lease, says where its holder takes the
// notifications other replicas forward: {"holder": identity, "url":
// "http://10.0.0.5:8082"}. The holder writes it with each renewal, in the
// same write as the holder identity, so that it names the holder of that
// renewal; other replicas read it when they read the Lease, every
// retryPeriod, as they campaign.
const relayAnnotation = "argocd-image-updater.argoproj.io/webhook-relay"

type relayAdvert struct {
	Holder string `json:"holder"`
	URL    string `json:"url"`
}

// leaseObserver writes this replica's webhook address on the Lease while
// it holds it, and keeps what it last read of the Lease's holder.
type leaseObserver struct {
	id  string
	now func() time.Time

	mu  sync.Mutex
	url string // this replica's address; "" advertises none
	// The holder last read, its advertised address, its renewal as
	// written, and when this replica saw that renewal first: a Lease not
	// renewed for leaseDuration by this replica's clock has no live holder.
	holder, holderURL string
	renewed           time.Time
	seen              time.Time
}

func (o *leaseObserver) advertise(url string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.url = url
}

// leader is what this replica knows of the replica that leads, for the
// webhook's relay.
func (o *leaseObserver) leader() webhook.Leader {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holder == "" || o.holder == o.id || o.now().Sub(o.seen) > leaseDuration {
		return webhook.Leader{}
	}
	return webhook.Leader{Known: true, URL: o.holderURL}
}

// stamp puts this replica's address on a Lease it is about to write when
// the write names it holder, and takes any other address off.
func (o *leaseObserver) stamp(lease *coordinationv1.Lease) *coordinationv1.Lease {
	o.mu.Lock()
	url := o.url
	o.mu.Unlock()
	lease = lease.DeepCopy()
	holds := lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == o.id
	if holds && url != "" {
		value, _ := json.Marshal(relayAdvert{Holder: o.id, URL: url})
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[relayAnnotation] = string(value)
	} else {
		delete(lease.Annotations, relayAnnotation)
	}
	return lease
}

// observe records the Lease as read or written.
func (o *leaseObserver) observe(lease *coordinationv1.Lease) {
	var holder, url string
	var renewed time.Time
	if h := lease.Spec.HolderIdentity; h != nil {
		holder = *h
	}
	if r := lease.Spec.RenewTime; r != nil {
		renewed = r.Time
	}
	var ad relayAdvert
	if err := json.Unmarshal([]byte(lease.Annotations[relayAnnotation]), &ad); err == nil && ad.Holder == holder {
		url = ad.URL
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if holder != o.holder || !renewed.Equal(o.renewed) {
		o.seen = o.now()
	}
	o.holder, o.holderURL, o.renewed = holder, url, renewed
}

// observedLeases is the Lease client of the primary Lease, through o.
type observedLeases struct {
	coordinationv1client.LeasesGetter
	o *leaseObserver
}

func (l observedLeases) Leases(namespace string) coordinationv1client.LeaseInterface {
	return observedLease{LeaseInterface: l.LeasesGetter.Leases(namespace), o: l.o}
}

type observedLease struct {
	coordinationv1client.LeaseInterface
	o *leaseObserver
}

func (l observedLease) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	lease, err := l.LeaseInterface.Get(ctx, name, opts)
	if err == nil {
		l.o.observe(lease)
	}
	return lease, err
}

func (l observedLease) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Create(ctx, l.o.stamp(lease), opts)
	if err == nil {
		l.o.observe(out)
	}
	return out, err
}

func (l observedLease) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Update(ctx, l.o.stamp(lease), opts)
	if err == nil {
		l.o.observe(out)
	}
	return out, err
}

// relayURL is the address this replica advertises for forwarded
// notifications: its Pod IP (POD_IP, from the downward API) and the
// webhook port; "" without a Pod IP, or when the endpoint listens on
// another address only.
func relayURL(podIP, listen string, port int, tls bool) string {
	ip, err := netip.ParseAddr(podIP)
	if err != nil {
		return ""
	}
	if listen != "" {
		l, err := netip.ParseAddr(listen)
		if err != nil || !(l.IsUnspecified() || l == ip) {
			return ""
		}
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(ip.String(), strconv.Itoa(port))
}
