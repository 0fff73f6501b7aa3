// Package registry is the controller's view of container registries: the
// registries.conf file (and its live reloading), image references as users
// write them in annotations, the credential references that say where a
// registry's credentials come from, and the Client that lists tags and reads
// image metadata with those credentials, rate limits and retries.
//
// Everything here is built from values passed in by the caller; the package
// keeps no global state, so several configurations can coexist (for example
// in tests).
package registry
