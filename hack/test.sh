#!/usr/bin/env bash
# make test's one pass: each test runs once. The packages whose tests start
# no test server run under the race detector; those whose tests start
# servers (they import test/testenv, as its own tests do) run without
# it, four packages and four tests a package at a time: most of their time
# is spent waiting on servers starting, lease and grace timings, not on the
# CPU, and under the race detector their binaries take several times the
# time and memory. e2e runs in a go test of its own, first, with more of
# its tests at once: its scenarios spend their minutes waiting on Argo CD
# syncing, not on the CPU. Prints the elapsed time last.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
GO=${GO:-go}
assets="$(hack/testbin.sh)"
export KUBEBUILDER_ASSETS="$assets"
# The controller is linked once, for every test that runs it
# (testenv.UpdaterBinary).
bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
$GO build -o "$bin_dir/argocd-image-updater" ./cmd/argocd-image-updater
export DEMO_BINARY="$bin_dir/argocd-image-updater"

testenv=github.com/image-updater/argocd-image-updater/test/testenv
race=() servers=()
while read -r pkg imports; do
	if [ "$pkg" = "$testenv" ] || [[ " $imports " == *" $testenv "* ]]; then
		servers+=("$pkg")
	else
		race+=("$pkg")
	fi
done < <($GO list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./...)

# e2e runs first, alone: its scenarios run side by side (-parallel 16),
# each mostly waiting on its Argo CD, and with the cores to themselves
# no Argo CD misses a deadline of its own (beside the other packages' API
# servers, Argo CD's cluster cache timed out reading the API server's
# OpenAPI schema). Of the others, the slowest start first: go test starts
# packages in the order it is given them.
module=github.com/image-updater/argocd-image-updater
e2e=() ordered=()
for i in "${!servers[@]}"; do
	if [ "${servers[$i]}" = "$module/test/e2e" ]; then
		e2e+=("${servers[$i]}")
		unset 'servers[i]'
	fi
done
for slow in cmd/argocd-image-updater test/demo; do
	for i in "${!servers[@]}"; do
		if [ "${servers[$i]}" = "$module/$slow" ]; then
			ordered+=("${servers[$i]}")
			unset 'servers[i]'
		fi
	done
done
servers=("${ordered[@]}" "${servers[@]}")

status=0 phases=
phase() { # phase NAME go test ARGS...: runs it, keeps its time
	local name=$1 t0=$SECONDS
	shift
	"$@" || status=$?
	phases+="${phases:+, }$name $((SECONDS - t0))s"
}
phase e2e $GO test -count=1 -parallel 16 -timeout 20m "${e2e[@]}"
phase race $GO test -count=1 -race -timeout 10m "${race[@]}"
phase servers $GO test -count=1 -p 4 -parallel 4 -timeout 20m "${servers[@]}"
elapsed=$((SECONDS - start))
printf 'make test: %d packages under the race detector, %d with test servers, %dm%02ds (%s)\n' \
	"${#race[@]}" $((${#servers[@]} + ${#e2e[@]})) $((elapsed / 60)) $((elapsed % 60)) "$phases"
exit $status
