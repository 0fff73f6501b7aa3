package main

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// splitLeader is the holder the elector sees while the two Leases name
// different holders: another controller, v1.x perhaps, holds one of them.
const splitLeader = "(the two leader Leases name different holders)"

// leasePair is the lock over this controller's Lease and v1.x's, held only
// when both name this replica. It replaces client-go's MultiLock, which is
// deprecated and wedges on an upgrade from v1.x: once the first Lease names
// this replica, a missing second Lease makes its Get answer NotFound, the
// elector then calls Create, and Create fails on the first Lease for ever.
//
// Here a Lease that does not exist, or whose holder was cleared (a clean
// stop releases it so), holds nothing: the pair's holder is then the other
// Lease's, and the elector takes a free pair at once instead of waiting for
// a Lease to expire. Update creates a Lease that is missing.
type leasePair struct {
	primary, secondary *resourcelock.LeaseLock
	// exists tells whether the last read or write of each Lease found it,
	// so that Update creates one that is missing instead of updating it.
	primaryExists, secondaryExists bool
}

var _ resourcelock.Interface = (*leasePair)(nil)

func (p *leasePair) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	prim, primRaw, err := get(ctx, p.primary, &p.primaryExists)
	if err != nil {
		return nil, nil, err
	}
	sec, secRaw, err := get(ctx, p.secondary, &p.secondaryExists)
	if err != nil {
		return nil, nil, err
	}
	if prim == nil && sec == nil {
		return nil, nil, apierrors.NewNotFound(leaseResource, p.primary.LeaseMeta.Name)
	}
	// The raw record changes when either Lease does: the elector measures
	// a holder's expiry from the last change it saw.
	raw, err := json.Marshal([2]json.RawMessage{nullIfEmpty(primRaw), nullIfEmpty(secRaw)})
	if err != nil {
		return nil, nil, err
	}
	return pairRecord(prim, sec), raw, nil
}

// pairRecord is the record of the pair. A secondary Lease that is missing
// or released holds nothing, and the pair is the primary's. A secondary
// held alone, or with a primary of another holder, is another controller's
// (v1.x's, or one of these replicas halfway through taking both): the pair
// is split, and its expiry is the secondary's.
func pairRecord(prim, sec *resourcelock.LeaderElectionRecord) *resourcelock.LeaderElectionRecord {
	secFree := sec == nil || sec.HolderIdentity == ""
	switch {
	case secFree && prim != nil:
		return prim
	case secFree:
		return sec
	case prim != nil && prim.HolderIdentity == sec.HolderIdentity:
		return prim
	}
	split := *sec
	split.HolderIdentity = splitLeader
	return &split
}

func get(ctx context.Context, l *resourcelock.LeaseLock, exists *bool) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		*exists = false
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	}
	*exists = true
	return rec, raw, nil
}

// Create creates both Leases, the first only if it does not exist: a first
// Lease that exists is another replica's, which creates the second, and
// nothing more is created. (Two replicas each creating one Lease would
// both hold half and neither lead until the Leases expired.)
func (p *leasePair) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := p.primary.Create(ctx, rec); err != nil {
		return err
	}
	p.primaryExists = true
	if err := p.secondary.Create(ctx, rec); err != nil {
		return err
	}
	p.secondaryExists = true
	return nil
}

// Update writes rec to both Leases, creating one that is missing. Each
// write carries the version last read, so a Lease another holder renewed
// since is not overwritten.
func (p *leasePair) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := put(ctx, p.primary, &p.primaryExists, rec); err != nil {
		return err
	}
	return put(ctx, p.secondary, &p.secondaryExists, rec)
}

func put(ctx context.Context, l *resourcelock.LeaseLock, exists *bool, rec resourcelock.LeaderElectionRecord) error {
	if *exists {
		err := l.Update(ctx, rec)
		if !apierrors.IsNotFound(err) {
			return err
		}
		// Deleted since it was read.
		*exists = false
	}
	if err := l.Create(ctx, rec); err != nil {
		return err
	}
	*exists = true
	return nil
}

func (p *leasePair) RecordEvent(s string) {
	p.primary.RecordEvent(s)
	p.secondary.RecordEvent(s)
}

func (p *leasePair) Describe() string {
	return p.primary.Describe() + " and " + p.secondary.Describe()
}

func (p *leasePair) Identity() string { return p.primary.Identity() }

func nullIfEmpty(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

var leaseResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
