#!/usr/bin/env bash
# Installs what the tests need into a cache outside the checkout, so only the
# first run on a machine pays for it:
#   - Debian packages: git, openssh-server (sshd), apache2-utils (htpasswd),
#     gnupg (gpg, for commit signing with a key from a GnuPG keyring)
#     redis-server (for Argo CD)
#   - etcd, kube-apiserver, kube-controller-manager, the Distribution
#     registry, helm, kustomize and Argo CD's application-controller,
#     repo-server, config management plugin server, notifications
#     controller and ApplicationSet controller, built from the Go module
#     proxy and kept under $TESTBIN/<component>-<version>/.
# Prints the testbin directory on its last line.
set -euo pipefail

ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
REGISTRY_VERSION=${REGISTRY_VERSION:-v3.1.2}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
# The newest Argo CD that builds from the module proxy alone (v3.3 needs its
# in-tree gitops-engine, which the module download lacks); v3 is the line
# Argo CD supports today. Its CRDs are the ones the tests against it install.
ARGOCD_VERSION=${ARGOCD_VERSION:-v3.2.11}
TESTBIN=${TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/argocd-image-updater/testbin}

log() { echo "testbin: $*" >&2; }

install_debian_packages() {
	local missing=()
	command -v git >/dev/null || missing+=(git)
	[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
	command -v htpasswd >/dev/null || missing+=(apache2-utils)
	command -v gpg >/dev/null || missing+=(gnupg)
	command -v redis-server >/dev/null || missing+=(redis-server)
	[ ${#missing[@]} -eq 0 ] && return
	log "installing Debian packages: ${missing[*]}"
	local sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# build_in_module DIR OUT PKG [LDFLAGS]: builds PKG from the throwaway module in
# DIR (go.mod and tools.go already written) into OUT.
build_in_module() {
	local dir=$1 out=$2 pkg=$3 ldflags=${4:-}
	(cd "$dir" && GOFLAGS=-mod=mod go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$out" "$pkg" >&2)
}

install_etcd() {
	local dest=$TESTBIN/etcd-$ETCD_VERSION
	[ -x "$dest/etcd" ] && return
	log "building etcd $ETCD_VERSION"
	local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
	cat >"$work/go.mod" <<MOD
module testbin/etcd
go 1.24
require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
	printf '//go:build tools\npackage tools\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$work/tools.go"
	mkdir -p "$dest"
	build_in_module "$work" "$dest/etcd.tmp" go.etcd.io/etcd/server/v3
	mv "$dest/etcd.tmp" "$dest/etcd"
}

# install_kube COMPONENT: kube-apiserver or kube-controller-manager.
install_kube() {
	local c=$1 dest=$TESTBIN/$1-$KUBE_VERSION
	[ -x "$dest/$c" ] && return
	log "building $c $KUBE_VERSION (several minutes on a cold cache)"
	local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
	local staging=${KUBE_VERSION/v1./v0.}
	# k8s.io/kubernetes replaces its staging modules with local folders; point
	# each at the published module of the matching version instead.
	local gomod; gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	{
		echo "module testbin/$c"
		echo "go 1.24"
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$gomod" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
	} >"$work/go.mod"
	printf '//go:build tools\npackage tools\nimport _ "k8s.io/kubernetes/cmd/%s"\n' "$c" >"$work/tools.go"
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	mkdir -p "$dest"
	build_in_module "$work" "$dest/$c.tmp" "k8s.io/kubernetes/cmd/$c" \
		"-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	mv "$dest/$c.tmp" "$dest/$c"
}

install_registry() {
	local dest=$TESTBIN/registry-$REGISTRY_VERSION
	[ -x "$dest/registry" ] && return
	log "building the Distribution registry $REGISTRY_VERSION"
	mkdir -p "$dest"
	GOBIN="$dest" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION" >&2
}

install_helm() {
	local dest=$TESTBIN/helm-$HELM_VERSION
	[ -x "$dest/helm" ] && return
	log "building helm $HELM_VERSION"
	# helm takes its own version, and the Kubernetes version that lint and
	# template assume, from linker flags; set them as its release builds do,
	# the Kubernetes minor from the client-go it requires.
	local gomod; gomod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	local minor; minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")
	local x=""
	for pkg in pkg/lint/rules pkg/chartutil; do
		x="$x -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
	done
	mkdir -p "$dest"
	GOBIN="$dest" CGO_ENABLED=0 go install -trimpath \
		-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION$x" \
		"helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
}

# argocd_source: the folder of the Argo CD module in the module cache.
argocd_source() {
	GOFLAGS= go mod download -json "github.com/argoproj/argo-cd/${ARGOCD_VERSION%%.*}@$ARGOCD_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'
}

# install_kustomize: the kustomize version this Argo CD ships with.
install_kustomize() {
	local v; v=v$(sed -n 's/^kustomize5_version=//p' "$(argocd_source)/hack/tool-versions.sh")
	local dest=$TESTBIN/kustomize-$v
	[ -x "$dest/kustomize" ] && { KUSTOMIZE_DIR=$dest; return; }
	log "building kustomize $v"
	mkdir -p "$dest"
	GOBIN="$dest" CGO_ENABLED=0 GOFLAGS= go install -trimpath \
		-ldflags "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=$v" \
		"sigs.k8s.io/kustomize/kustomize/v5@$v" >&2
	KUSTOMIZE_DIR=$dest
}

# build_argocd: builds main (a file of hack/ whose imports name
# ARGOCD_MODULE) against Argo CD into the executable out, from a throwaway
# module whose go.mod is Argo CD's own, module line renamed, so that Argo
# CD's replace directives and pinned versions apply. A subshell, so that
# the work folder's removal on exit is its own.
build_argocd() (
	main=$1 out=$2
	src=$(argocd_source)
	mod=github.com/argoproj/argo-cd/${ARGOCD_VERSION%%.*}
	work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
	sed -e 's#^module .*#module testbin/argocd#' "$src/go.mod" >"$work/go.mod"
	cp "$src/go.sum" "$work/go.sum"
	chmod u+w "$work/go.mod" "$work/go.sum"
	printf '\nrequire %s %s\n' "$mod" "$ARGOCD_VERSION" >>"$work/go.mod"
	sed -e "s#ARGOCD_MODULE#$mod#g" -e "/^\/\/go:build ignore/d" "$(dirname "$0")/$main" >"$work/main.go"
	mkdir -p "$(dirname "$out")"
	(cd "$work" && GOFLAGS=-mod=mod go mod tidy >&2 && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
		-ldflags "-s -w -X $mod/common.version=${ARGOCD_VERSION#v} -X $mod/common.gitTag=$ARGOCD_VERSION -X $mod/common.gitTreeState=clean" \
		-o "$out.tmp" . >&2)
	mv "$out.tmp" "$out"
)

# install_argocd: Argo CD's application-controller and repo-server (and the
# git-ask-pass helper the repo-server runs as "argocd"), one binary that
# picks its component from its name, as Argo CD's own cmd/main.go does.
# The full binary (server, CLI, UI) is not needed.
install_argocd() {
	local dest=$TESTBIN/argocd-$ARGOCD_VERSION
	[ -x "$dest/argocd" ] && return
	log "building Argo CD $ARGOCD_VERSION (several minutes on a cold cache)"
	build_argocd argocd-main.go "$dest/argocd"
	# The components find themselves by name.
	for name in argocd-application-controller argocd-repo-server; do
		ln -sf argocd "$dest/$name"
	done
}

# install_argocd_cmp_server: Argo CD's config management plugin server, a
# binary of its own so that adding it left the one above as it was built.
# After install_argocd the packages it shares with it are in Go's build
# cache: it takes about half a minute.
install_argocd_cmp_server() {
	local dest=$TESTBIN/argocd-cmp-server-$ARGOCD_VERSION
	[ -x "$dest/argocd-cmp-server" ] && return
	log "building Argo CD's config management plugin server $ARGOCD_VERSION"
	build_argocd argocd-cmp-server-main.go "$dest/argocd-cmp-server"
}

# install_argocd_notifications: Argo CD's notifications controller, a binary
# of its own as the plugin server is, for the same reason.
install_argocd_notifications() {
	local dest=$TESTBIN/argocd-notifications-$ARGOCD_VERSION
	[ -x "$dest/argocd-notifications" ] && return
	log "building Argo CD's notifications controller $ARGOCD_VERSION"
	build_argocd argocd-notifications-main.go "$dest/argocd-notifications"
}

# install_argocd_applicationset: Argo CD's ApplicationSet controller, a
# binary of its own as the plugin server is, for the same reason.
install_argocd_applicationset() {
	local dest=$TESTBIN/argocd-applicationset-controller-$ARGOCD_VERSION
	[ -x "$dest/argocd-applicationset-controller" ] && return
	log "building Argo CD's ApplicationSet controller $ARGOCD_VERSION"
	build_argocd argocd-applicationset-main.go "$dest/argocd-applicationset-controller"
}

install_debian_packages
mkdir -p "$TESTBIN"
install_etcd
install_registry
install_helm
install_kube kube-apiserver
install_kube kube-controller-manager
install_kustomize
install_argocd
install_argocd_cmp_server
install_argocd_notifications
install_argocd_applicationset

# envtest wants etcd and kube-apiserver in one folder.
assets=$TESTBIN/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION
mkdir -p "$assets"
ln -sf "$TESTBIN/etcd-$ETCD_VERSION/etcd" "$assets/etcd"
ln -sf "$TESTBIN/kube-apiserver-$KUBE_VERSION/kube-apiserver" "$assets/kube-apiserver"
ln -sf "$TESTBIN/kube-controller-manager-$KUBE_VERSION/kube-controller-manager" "$assets/kube-controller-manager"
ln -sf "$KUSTOMIZE_DIR/kustomize" "$assets/kustomize"
for name in argocd argocd-application-controller argocd-repo-server; do
	ln -sf "$TESTBIN/argocd-$ARGOCD_VERSION/$name" "$assets/$name"
done
ln -sf "$TESTBIN/argocd-cmp-server-$ARGOCD_VERSION/argocd-cmp-server" "$assets/argocd-cmp-server"
ln -sf "$TESTBIN/argocd-notifications-$ARGOCD_VERSION/argocd-notifications" "$assets/argocd-notifications"
ln -sf "$TESTBIN/argocd-applicationset-controller-$ARGOCD_VERSION/argocd-applicationset-controller" "$assets/argocd-applicationset-controller"
echo "$ARGOCD_VERSION" >"$assets/argocd.version"
ln -sf "$TESTBIN/registry-$REGISTRY_VERSION/registry" "$assets/registry"
ln -sf "$TESTBIN/helm-$HELM_VERSION/helm" "$assets/helm"
echo "$assets"
