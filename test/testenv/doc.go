// Package testenv starts the real servers the controller talks to, for
// integration tests: a Kubernetes API server with etcd and Argo CD's
// Application CRD (envtest), the CNCF Distribution registry with htpasswd
// or bearer-token auth, and git over HTTP (git http-backend) and SSH
// (OpenSSH). Everything listens on loopback only, and every process a test
// starts is stopped by that test's cleanup, whether it passed or not; what
// the tests of a package share (SharedKube, UpdaterBinary under Main) is
// stopped when they have all run.
//
// The server binaries, and the helm the chart's tests run, come from
// `make testbin` (hack/testbin.sh), which builds them once per machine into
// a cache outside the checkout and prints the folder that KUBEBUILDER_ASSETS
// names.
package testenv
