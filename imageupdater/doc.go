// Package imageupdater serves ImageUpdater resources with the same update
// cycle as annotated Applications: Source gives the Applications each
// resource selects in its own namespace the resource's settings (read by
// settings.ParseImageUpdater), and Status reports what each cycle did in
// the resources' status.
package imageupdater
