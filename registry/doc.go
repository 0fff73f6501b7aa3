// Package registry is the controller's client for container registries: the
// Client lists tags and reads image metadata with go-containerregistry's
// remote package, over a transport stack of its own, with a session cache
// per repository and credential source, a metadata cache by digest, shared
// in-flight requests, and bounds on what a registry may send. It composes
// the sub-packages: config (registries.conf), credentials (where
// credentials come from) and transport (the HTTP layers).
package registry
