#!/usr/bin/env bash
# Builds upstream's controller (github.com/argoproj-labs/argocd-image-updater,
# UPSTREAM_VERSION, v1.3.0 by default) from its published sources, for the
# side-by-side benchmark (make bench-upstream). Optional: nothing else needs it.
# The binary is kept under $TESTBIN/upstream-<version>/, outside the checkout,
# so only the first run on a machine pays for the build (several minutes).
#
# Sources:
#   - the module from the Go module proxy (go mod download, checked against
#     the checksum database);
#   - its registry-scanner folder, a module of its own that upstream's go.mod
#     replaces with the local folder: the module zip leaves nested modules out
#     and the proxy does not serve that one, so it is taken from the git
#     commit the proxy records for the version (Origin.Hash), out of
#     UPSTREAM_GIT (a clone of upstream's repository that has that commit) or,
#     without it, fetched from GitHub by tag and checked against that commit;
#   - Argo CD's gitops-engine, which upstream's go.mod pins by a replace to a
#     pseudo-version of github.com/argoproj/argo-cd/gitops-engine: a folder of
#     the Argo CD repository at the commit of the Argo CD release upstream
#     requires. When the module proxy does not serve it, the folder is taken
#     from that commit, out of ARGOCD_GIT (a clone of argoproj/argo-cd) or
#     fetched from GitHub by the release's tag, and the replace points at it.
# The build is upstream's own (Makefile "build": CGO_ENABLED=0, ./cmd, its
# version variables set), with upstream's go.mod and go.sum otherwise as they
# are.
# Prints the binary's path on its last line.
set -euo pipefail

UPSTREAM_VERSION=${UPSTREAM_VERSION:-v1.3.0}
UPSTREAM_URL=${UPSTREAM_URL:-https://github.com/argoproj-labs/argocd-image-updater.git}
UPSTREAM_GIT=${UPSTREAM_GIT:-}
ARGOCD_URL=${ARGOCD_URL:-https://github.com/argoproj/argo-cd.git}
ARGOCD_GIT=${ARGOCD_GIT:-}
TESTBIN=${TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/argocd-image-updater/testbin}
MODULE=github.com/argoproj-labs/argocd-image-updater

log() { echo "upstream: $*" >&2; }

dest=$TESTBIN/upstream-$UPSTREAM_VERSION
bin=$dest/argocd-image-updater
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

log "downloading $MODULE@$UPSTREAM_VERSION from the Go module proxy"
json=$(cd / && GOFLAGS=-mod=mod go mod download -json "$MODULE@$UPSTREAM_VERSION")
field() { sed -n 's/^[[:space:]]*"'"$1"'": "\(.*\)",\{0,1\}$/\1/p' <<<"$json" | head -n1; }
dir=$(field Dir)
commit=$(field Hash)
if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
	log "the module proxy gave no source for $MODULE@$UPSTREAM_VERSION: $json"
	exit 1
fi
if [ -z "$commit" ]; then
	log "the module proxy records no commit for $MODULE@$UPSTREAM_VERSION, so registry-scanner cannot be matched to it"
	exit 1
fi

work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src=$work/src
cp -R "$dir" "$src"
chmod -R u+w "$src"

# from_git NAME CLONE URL TAG COMMIT FOLDER: extracts FOLDER of COMMIT into
# $src, from the clone CLONE or, without one, from TAG of URL, which must be
# COMMIT (a full hash or its 12-character prefix).
from_git() {
	local name=$1 clone=$2 url=$3 tag=$4 want=$5 folder=$6 repo got
	if [ -n "$clone" ]; then
		log "taking $folder from commit $want of $clone"
		repo=$clone
	else
		log "fetching tag $tag of $url for $folder"
		repo=$work/$name.git
		git init -q --bare "$repo"
		git -C "$repo" fetch -q --depth 1 "$url" "refs/tags/$tag:refs/tags/$tag"
	fi
	got=$(git -C "$repo" rev-parse --verify "$want^{commit}" 2>/dev/null || true)
	if [ -z "$clone" ]; then
		got=$(git -C "$repo" rev-parse "refs/tags/$tag^{commit}")
	fi
	case $got in
	"$want"*) ;;
	*)
		log "$name: expected commit $want, found ${got:-none}"
		exit 1
		;;
	esac
	git -C "$repo" archive "$got" "$folder" | tar -x -C "$src"
}

from_git upstream "$UPSTREAM_GIT" "$UPSTREAM_URL" "$UPSTREAM_VERSION" "$commit" registry-scanner

engine=github.com/argoproj/argo-cd/gitops-engine
engine_version=$(sed -n "s#^[[:space:]]*$engine => $engine \(v[^[:space:]]*\).*#\1#p" "$src/go.mod" | head -n1)
if [ -n "$engine_version" ] && ! (cd / && GOFLAGS=-mod=mod go mod download "$engine@$engine_version" 2>/dev/null); then
	argocd_version=$(sed -n 's#^[[:space:]]*github.com/argoproj/argo-cd/v3 \(v[^[:space:]]*\).*#\1#p' "$src/go.mod" | head -n1)
	log "the module proxy does not serve $engine@$engine_version; taking it from Argo CD $argocd_version"
	mkdir -p "$work/argocd"
	src=$work/argocd from_git argocd "$ARGOCD_GIT" "$ARGOCD_URL" "$argocd_version" "${engine_version##*-}" gitops-engine
	(cd "$src" && go mod edit -replace "$engine=$work/argocd/gitops-engine")
fi

log "building $MODULE $UPSTREAM_VERSION (commit ${commit:0:7}; several minutes on a cold cache)"
mkdir -p "$dest"
vp=$MODULE/pkg/version
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
	-ldflags "-X $vp.version=${UPSTREAM_VERSION#v} -X $vp.gitCommit=$commit -X $vp.buildDate=1970-01-01T00:00:00Z" \
	-o "$bin.tmp" ./cmd >&2)
mv "$bin.tmp" "$bin"
echo "$bin"
