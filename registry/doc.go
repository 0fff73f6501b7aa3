// Package registry is the controller's client for container registries: the
// Client lists tags and reads image metadata, with a session cache per
// repository and credential source, a metadata cache by digest, and shared
// in-flight requests. It composes the sub-packages: config (registries.conf),
// credentials (where credentials come from) and transport (the HTTP layers).
package registry
