// Package gcp is the credentials Source for Google's registries (Artifact
// Registry and Container Registry): an access token of the pod's Google
// identity, from application default credentials or the metadata server.
package gcp
