// Package bench measures the whole controller at scale: the real binary,
// run against a real API server, registry and git server, with thousands of
// Applications over hundreds of image repositories. TestScale counts what
// each update cycle costs (registry requests by kind through a counting
// proxy, Kubernetes API requests by verb through another, git fetches and
// pushes, wall time, CPU and memory) and writes a markdown report.
//
// By default TestScale runs a small smoke size, so that `go test ./...`
// keeps the harness working. The large scenarios run with -scale (or
// BENCH_SCALE=1), as `make bench` does:
//
//	KUBEBUILDER_ASSETS=$(hack/testbin.sh) go test -run '^TestScale$' -v -timeout 60m ./bench/ \
//		-args -scale -scale.write "$PWD/docs/benchmarks.md"
//
// Other flags:
//
//	-scale.only a,b              the scenarios to run (d, 50,000 Applications, only when named)
//	-scale.interval 30s          the controller's --interval instead of each scenario's
//	-scale.registry-limit 20     the registries.conf limit of the registry
//	-scale.controller-args "..." more controller flags (--kube-api-qps=500 ...)
//	-scale.controller-env "..."  more controller environment (GOGC=50 ...); the controller
//	                             runs with the soft memory limit it sets itself under the
//	                             install's container limit, GOMEMLIMIT=off runs it without
//	-scale.profile DIR           CPU profiles of each cycle and a heap profile, summarized in the report
//	-scale.gobench FILE          Go benchmark output to include in the report
//
// When -scale.write replaces a page, the part of it from the line
// handWrittenMarker to the end (figures measured by hand) is kept.
//
// BENCH_BINARY names a prebuilt controller binary (a relative path is taken
// from the module's root); otherwise the controller is built from this
// module while the servers start.
package bench
