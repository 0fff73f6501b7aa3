// Package manifest edits what names image versions in an Application's
// configuration: the Kustomize images and Helm parameters lists of a
// source, the .argocd-source override file, a kustomization's images and a
// Helm values file. The edits are pure (content in, content out) and keep
// every entry they do not change.
package manifest
