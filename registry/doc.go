// Package registry holds what the controller needs to know about container
// registries before it talks to one: the registries.conf file (and its live
// reloading), image references as users write them in annotations, and the
// credential references that say where a registry's credentials come from.
//
// Everything here is built from values passed in by the caller; the package
// keeps no global state, so several configurations can coexist (for example
// in tests).
package registry
