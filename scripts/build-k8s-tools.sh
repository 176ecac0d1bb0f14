#!/usr/bin/env bash
# build-k8s-tools.sh builds the Kubernetes control plane that tests of a
# Kubernetes backend run against, without Docker or a kubelet:
# kube-apiserver and kube-controller-manager from k8s.io/kubernetes on the Go
# module proxy (a throwaway module requiring it, with one replace line per
# staging module, as the kubernetes repository's own go.mod has them), and
# kwok (fake nodes that run no containers). Debian's etcd-server is installed
# when missing.
#
# The binaries go to a cache outside the repository, built once per machine
# (about 12 minutes on 2 cores): $EAS_K8S_TOOLS_DIR, default
# ${XDG_CACHE_HOME:-~/.cache}/eas-server/k8s-$K8S_VERSION. Prints that
# directory.
#
# Usage: scripts/build-k8s-tools.sh   (K8S_VERSION=1.37.2 KWOK_VERSION=v0.8.0)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
GO="${GO:-go}"
dest="${EAS_K8S_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/k8s-$K8S_VERSION}"

if ! command -v etcd >/dev/null; then
	sudo=""
	[[ "$(id -u)" == 0 ]] || sudo="sudo"
	echo "build-k8s-tools: installing etcd-server from Debian" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server
fi

if [[ -x "$dest/kube-apiserver" && -x "$dest/kube-controller-manager" && -x "$dest/kwok" ]]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

echo "build-k8s-tools: resolving k8s.io/kubernetes v$K8S_VERSION" >&2
"$GO" mod init eas-server-k8s-tools >/dev/null 2>&1
gomod="$("$GO" mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
[[ -f "$gomod" ]] || { echo "build-k8s-tools: no go.mod for k8s.io/kubernetes v$K8S_VERSION" >&2; exit 1; }
staging="v0.${K8S_VERSION#1.}"
{
	echo "require k8s.io/kubernetes v$K8S_VERSION"
	# k8s.io/X => ./staging/src/k8s.io/X becomes k8s.io/X => k8s.io/X v0.<minor>.<patch>
	sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/.*$|replace \1 => \1 '"$staging"'|p' "$gomod"
} >>go.mod

mkdir -p apiserver controllermanager
cat >apiserver/main.go <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
GO
cat >controllermanager/main.go <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }
GO
echo "build-k8s-tools: go mod tidy" >&2
"$GO" mod tidy >&2
echo "build-k8s-tools: building kube-apiserver and kube-controller-manager (about 12 minutes on 2 cores)" >&2
# The version a client reads from /version (kubectl warns on a skew).
ldflags="-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION"
"$GO" build -trimpath -ldflags "$ldflags" -o "$dest/kube-apiserver.tmp" ./apiserver
"$GO" build -trimpath -ldflags "$ldflags" -o "$dest/kube-controller-manager.tmp" ./controllermanager
mv -f "$dest/kube-apiserver.tmp" "$dest/kube-apiserver"
mv -f "$dest/kube-controller-manager.tmp" "$dest/kube-controller-manager"
echo "build-k8s-tools: go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
GOBIN="$dest" "$GO" install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
echo "$dest"
