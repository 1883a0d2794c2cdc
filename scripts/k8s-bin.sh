#!/usr/bin/env bash
# Prints the directory that holds the pinned Kubernetes programs the
# Kubernetes end-to-end tests run, building them on first use:
#   kube-apiserver kube-scheduler kubelet kubectl
#   etcd agent-sandbox-controller, and crds/ (agent-sandbox's CRDs)
# Debian packages none of them at usable versions, so each is built from the
# Go module proxy by a helper module under tests/kubernetes/tools (pinned
# version, committed go.sum), never downloaded prebuilt. A cold build takes
# about 1,400 s of CPU (an hour or more of a shared 2-CPU machine), so the
# directory is cached outside the checkout, keyed on the helper modules'
# go.mod and go.sum: a changed pin builds a new directory. Builds run at
# low priority with their own GOCACHE.
#
#   SBX_TEST_CACHE   cache directory (default /var/cache/sbx-test)
#   SBX_BUILD_NICE   niceness of the build (default 19: it yields to
#                    everything else on a shared machine)
set -euo pipefail
tools="$(cd "$(dirname "$0")/../tests/kubernetes/tools" && pwd)"
export PATH="/usr/local/go/bin:$PATH"

pin() { sed -n "s#^\(require\)\{0,1\}[[:space:]]*$2 \(v[0-9.]*\)\( // indirect\)\{0,1\}\$#\2#p" "$tools/$1/go.mod"; }
k8s=$(pin kube k8s.io/kubernetes)
etcd=$(pin etcd go.etcd.io/etcd/server/v3)
as=$(pin agentsandbox sigs.k8s.io/agent-sandbox)
for v in "$k8s" "$etcd" "$as"; do
	[[ -n "$v" ]] || { echo "k8s-bin: a version is not pinned in $tools/*/go.mod" >&2; exit 1; }
done
key=$(cat "$tools"/*/go.mod "$tools"/*/go.sum | sha256sum | cut -c1-12)
cache=${SBX_TEST_CACHE:-/var/cache/sbx-test}
dir="$cache/k8s-$k8s-$key"
want=(kube-apiserver kube-scheduler kubelet kubectl etcd agent-sandbox-controller crds)

complete() { for w in "${want[@]}"; do [[ -e "$dir/$w" ]] || return 1; done; }

# build MODULE OUT PKG... builds the packages of one helper module into OUT
# (a directory for several packages, a file for one).
build() {
	local mod=$1 out=$2; shift 2
	local ldflags=(-s -w)
	if [[ $mod == kube ]]; then
		local minor=${k8s#v1.}; minor=${minor%%.*}
		for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ldflags+=(-X "$p.gitVersion=$k8s" -X "$p.gitMajor=1" -X "$p.gitMinor=$minor" -X "$p.gitTreeState=clean")
		done
	fi
	(cd "$tools/$mod" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOCACHE="$cache/k8s-gocache" \
		nice -n "${SBX_BUILD_NICE:-19}" go build -trimpath -ldflags "${ldflags[*]}" -o "$out" "$@")
}

if ! complete; then
	mkdir -p "$cache"
	# One build at a time on a machine shared by several test runs.
	exec 9>"$cache/k8s-build.lock"
	flock 9
	if ! complete; then
		echo "k8s-bin: building Kubernetes $k8s, etcd $etcd, agent-sandbox $as into $dir (first time on this machine: 15-20 minutes of 2 idle CPUs, an hour or more when shared)" >&2
		start=$SECONDS
		tmp="$dir.tmp"
		mkdir -p "$tmp"
		build etcd "$tmp/etcd" go.etcd.io/etcd/server/v3
		build agentsandbox "$tmp/" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
		build kube "$tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
			k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl
		crds=$(cd "$tools/agentsandbox" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)/k8s/crds
		mkdir -p "$tmp/crds"
		cp "$crds"/*.yaml "$tmp/crds/"
		chmod -R u+w "$tmp/crds"
		rm -rf "$dir"
		mv "$tmp" "$dir"
		echo "k8s-bin: built in $((SECONDS - start)) s" >&2
	fi
	exec 9>&-
fi
"$dir/kubelet" --version | grep -q "^Kubernetes $k8s\$" || { echo "k8s-bin: $dir/kubelet is not Kubernetes $k8s" >&2; exit 1; }
echo "$dir"
