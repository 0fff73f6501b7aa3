// Package config is the registries.conf file: its model (one Endpoint per
// registry or image prefix), its parsing, whose errors name file, line and
// field, the matching of images to endpoints, and its live reloading
// (Watch), which keeps the last good configuration when the file breaks.
package config
