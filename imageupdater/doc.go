// Package imageupdater serves ImageUpdater resources with the same update
// cycle as annotated Applications: Source turns each resource and the
// Applications it selects in its own namespace into the appwatch values
// the cycle plans from, and Status reports what each cycle did in the
// resources' status.
package imageupdater
