// Package webhook receives the push notifications of registries and turns
// them into targeted checks of the repositories they name.
//
// The Handler serves POST /webhook. It picks the payload format from the
// ?type= query parameter or the X-Registry-Type header (docker.io, ghcr.io,
// quay.io, harbor, distribution, acr, cloudevents, artifact-registry,
// aliyun-acr), refuses a source that has no secret
// unless unauthenticated sources were allowed, authenticates the request
// the way that registry signs it, bounds the body and the request rate per
// source, and reads from the payload only which repositories got a push.
// The tag or digest a payload mentions is never used: the check lists the
// repository's tags itself, with the controller's own credentials, and lets
// each image's strategy and filters choose as a cycle would. A forged or
// replayed notification can therefore cause at most one extra check.
//
// The Dispatcher checks the repositories a notification names at once,
// through a Checker, the update cycle's CheckRepositories, which never
// overlaps a cycle; what is notified while a check runs or waits is merged
// into the one check that follows it.
//
// Checks run on the replica that holds the leader Lease. A replica that
// does not lead relays (WithRelay, Forward): it forwards the repositories
// of what it accepts, signed with a key derived from the webhook secrets,
// to the leader's RelayHandler, or keeps them, bounded in number and time,
// while no replica leads.
package webhook
