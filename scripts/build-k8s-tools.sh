#!/usr/bin/env bash
# build-k8s-tools.sh builds the Kubernetes control plane that tests of a
# Kubernetes backend run against, without Docker or a kubelet:
# kube-apiserver, kube-controller-manager and kube-scheduler from
# k8s.io/kubernetes on the Go module proxy (a throwaway module requiring it,
# with one replace line per staging module, as the kubernetes repository's own
# go.mod has them), kwok (fake nodes that run no containers; it schedules
# nothing, hence kube-scheduler), helm (the Helm chart test renders with
# it) and etcd from go.etcd.io/etcd/server/v3. Debian's etcd-server (3.4.23)
# is too old: kube-apiserver cannot ask it for watch progress
# (RequestWatchProgress), so every informer's watch keeps failing and
# falling back, and rollouts stall for minutes.
#
# The binaries go to a cache outside the repository, built once per machine
# (about 20 minutes on 2 cores): $EAS_K8S_TOOLS_DIR, default
# ${XDG_CACHE_HOME:-~/.cache}/eas-server/k8s-$K8S_VERSION. Only the missing
# ones are built. Prints that directory.
#
# Usage: scripts/build-k8s-tools.sh
#        (K8S_VERSION=1.37.2 KWOK_VERSION=v0.8.0 HELM_VERSION=v3.22.0 ETCD_VERSION=v3.6.16)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
GO="${GO:-go}"
dest="${EAS_K8S_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/eas-server/k8s-$K8S_VERSION}"

# name:main package, for the binaries built from k8s.io/kubernetes.
k8s_cmds=(
	kube-apiserver:k8s.io/kubernetes/cmd/kube-apiserver/app.NewAPIServerCommand
	kube-controller-manager:k8s.io/kubernetes/cmd/kube-controller-manager/app.NewControllerManagerCommand
	kube-scheduler:k8s.io/kubernetes/cmd/kube-scheduler/app.NewSchedulerCommand
)
missing=()
for c in "${k8s_cmds[@]}"; do
	[[ -x "$dest/${c%%:*}" ]] || missing+=("$c")
done
if [[ ${#missing[@]} == 0 && -x "$dest/kwok" && -x "$dest/helm" && -x "$dest/etcd" ]]; then
	echo "$dest"
	exit 0
fi
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [[ ${#missing[@]} -gt 0 ]]; then
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
	for c in "${missing[@]}"; do
		name="${c%%:*}" fn="${c#*:}"
		mkdir -p "$name"
		cat >"$name/main.go" <<GO
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"${fn%.*}"
)

func main() { os.Exit(cli.Run(app.${fn##*.}())) }
GO
	done
	echo "build-k8s-tools: go mod tidy" >&2
	"$GO" mod tidy >&2
	# The version a client reads from /version (kubectl warns on a skew).
	ldflags="-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION"
	for c in "${missing[@]}"; do
		name="${c%%:*}"
		echo "build-k8s-tools: building $name (the first about 10 minutes on 2 cores, each further one about 3)" >&2
		"$GO" build -trimpath -ldflags "$ldflags" -o "$dest/$name.tmp" "./$name"
		mv -f "$dest/$name.tmp" "$dest/$name"
	done
	cd - >/dev/null
fi
if [[ ! -x "$dest/kwok" ]]; then
	echo "build-k8s-tools: go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
	GOBIN="$dest" "$GO" install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi
if [[ ! -x "$dest/helm" ]]; then
	echo "build-k8s-tools: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
	GOBIN="$dest" "$GO" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
if [[ ! -x "$dest/etcd" ]]; then
	# go install refuses the etcd server module (its go.mod has replace
	# lines), so a throwaway module requires it and builds its main.
	echo "build-k8s-tools: building etcd $ETCD_VERSION (about a minute)" >&2
	etcdwork="$work/etcd"
	mkdir -p "$etcdwork"
	(
		cd "$etcdwork"
		"$GO" mod init eas-server-etcd >/dev/null 2>&1
		cat >main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
		"$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
		"$GO" mod tidy >&2
		"$GO" build -trimpath -o "$dest/etcd.tmp" .
		mv -f "$dest/etcd.tmp" "$dest/etcd"
	)
fi
echo "$dest"
