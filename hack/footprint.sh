#!/usr/bin/env bash
# The controller's footprint at rest, as docs/benchmarks.md reports it:
# the binary's size and packages, the RSS of `version` (start-up and the
# package initialisers only), what the initialisers allocate, and the
# share of each module in the machine code, read from the
# symbol table of an unstripped build.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$work/stripped" ./cmd/argocd-image-updater
CGO_ENABLED=0 $GO build -trimpath -o "$work/full" ./cmd/argocd-image-updater

printf 'binary (stripped): %.1f MiB\n' "$(echo "$(stat -c %s "$work/stripped") / 1048576" | bc -l)"
printf 'packages linked: %d\n' "$($GO list -deps ./cmd/argocd-image-updater | wc -l)"
rss=$( { /usr/bin/time -f '%M' "$work/stripped" version >/dev/null; } 2>&1 | tail -1)
printf 'RSS of `version`: %.1f MiB\n' "$(echo "$rss / 1024" | bc -l)"
GODEBUG=inittrace=1 "$work/stripped" version 2>&1 >/dev/null | awk '
	/^init / { n++; ms += $5; bytes += $8 }
	END { printf "package initialisers: %d, %.1f ms, %.1f MiB allocated\n", n, ms, bytes / 1048576 }'
echo
echo '| module | machine code, MiB |'
echo '|---|---|'
$GO tool nm -size "$work/full" | awk '
	$3 ~ /^[Tt]$/ {
		name = $4
		sub(/^type:(\.eq\.|\.namedata\.|\.importpath\.)?\*?/, "", name)
		sub(/^go:itab\.\*?/, "", name)
		sub(/^go:(string|func|cuinfo|info)\.[^.]*\./, "", name)
		n = split(name, p, "/")
		if (p[1] ~ /\./ && n >= 2) {
			depth = (p[1] ~ /^(github\.com|gitlab\.com|bitbucket\.org|golang\.org)$/) ? 3 : 2
			if (p[1] == "go.opentelemetry.io" || p[1] == "sigs.k8s.io") depth = 2
			mod = p[1]
			for (i = 2; i <= depth && i <= n; i++) { seg = p[i]; if (i == n || i == depth) sub(/\..*$/, "", seg); mod = mod "/" seg }
		} else {
			mod = "Go standard library and runtime"
		}
		size[mod] += $2
	}
	END { for (m in size) printf "| %s | %.1f |\n", m, size[m] / 1048576 }
' | sort -t'|' -k3 -rn | head -15
