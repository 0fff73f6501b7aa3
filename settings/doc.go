// Package settings is the updater's vocabulary: an Application's images
// with their update settings and its write-back configuration, read once
// from either source a user writes them in (the Application's annotations,
// or an ImageUpdater resource), each value knowing its Origin so that a
// bad one is reported where it is written. A bad entry is a Problem that
// disables only what it concerns.
package settings
