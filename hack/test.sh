#!/usr/bin/env bash
# make test's one pass: each test runs once. The packages whose tests start
# no test server run under the race detector; those whose tests start
# servers (they import internal/testenv, as its own tests do) run without
# it, four packages and four tests a package at a time: most of their time
# is spent waiting on servers starting, lease and grace timings, not on the
# CPU, and under the race detector their binaries take several times the
# time and memory. Prints the elapsed time last.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
GO=${GO:-go}
assets="$(hack/testbin.sh)"
export KUBEBUILDER_ASSETS="$assets"

testenv=github.com/image-updater/argocd-image-updater/internal/testenv
race=() servers=()
while read -r pkg imports; do
	if [ "$pkg" = "$testenv" ] || [[ " $imports " == *" $testenv "* ]]; then
		servers+=("$pkg")
	else
		race+=("$pkg")
	fi
done < <($GO list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./...)

# The packages that take longest start first: the run lasts at least as
# long as e2e does (6-8 minutes of the 10 the packages with servers take
# on 2 cores), and go test starts packages in the order they are given.
module=github.com/image-updater/argocd-image-updater
ordered=()
for slow in e2e cmd/argocd-image-updater demo; do
	for i in "${!servers[@]}"; do
		if [ "${servers[$i]}" = "$module/$slow" ]; then
			ordered+=("${servers[$i]}")
			unset 'servers[i]'
		fi
	done
done
servers=("${ordered[@]}" "${servers[@]}")

status=0
$GO test -count=1 -race -timeout 10m "${race[@]}" || status=$?
$GO test -count=1 -p 4 -parallel 4 -timeout 20m "${servers[@]}" || status=$?
elapsed=$((SECONDS - start))
printf 'make test: %d packages under the race detector, %d with test servers, %dm%02ds\n' \
	"${#race[@]}" "${#servers[@]}" $((elapsed / 60)) $((elapsed % 60))
exit $status
