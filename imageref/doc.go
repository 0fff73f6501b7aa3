// Package imageref is the one image reference value of the controller: an
// image is parsed once, where it enters (an Application's annotations or an
// ImageUpdater), and the same Reference travels through the update cycle,
// the registry client and the write-back.
//
// Parsing follows go-containerregistry's name package and the distribution
// reference grammar. Docker Hub's spellings (docker.io, index.docker.io,
// registry-1.docker.io, a missing "library/") and the case of the host are
// normalised, so equality and name matching are defined here and nowhere
// else. The user's own spelling is kept for writing back.
//
// A Version is what follows a name: a tag, a digest or both; its String is
// the one place "tag@digest" is formatted.
package imageref
