// Package docs holds the user documentation of argocd-image-updater as
// Markdown files. Its test runs every example the documentation shows: see
// docs_test.go for the tags code blocks carry and what each one checks.
package docs
