#!/usr/bin/env bash
# Installs what sbx needs, and only that, so a fresh Debian machine needs
# nothing by hand. Idempotent: installs only what is missing.
#
#   install-deps.sh           what `make build` needs: a C compiler, static
#                             libseccomp, git, and Go 1.25 or later
#   install-deps.sh --test    also what the test suite runs (busybox-static,
#                             debootstrap, skopeo, umoci, nftables, runc,
#                             containerd, Python, CRIU 4...)
#   install-deps.sh --bench   also the runtimes `sbx bench` compares against
#
# The test targets build their own expensive pieces on first use and cache
# them under /var/cache/sbx-test: the pinned Nomad (scripts/nomad-bin.sh),
# the SDK's Python venv (scripts/python-venv.sh), the OpenHands trees
# (tests/openhands/build-image.sh), the pinned Kubernetes programs, etcd and
# agent-sandbox's controller (scripts/k8s-bin.sh).
set -euo pipefail

pkgs=(ca-certificates gcc libc6-dev make pkg-config libseccomp-dev git)
case "${1:-}" in
"") ;;
# runc is the reference the runc-compatible command set (sbx-runc) is tested
# against; containerd runs sbx-runc through its runc shim in those tests.
# crun is an anchor the bench's tests must measure (never a dependency).
--test) pkgs+=(busybox-static debootstrap iproute2 nftables iptables procps python3 python3-venv tar skopeo umoci
               runc containerd crun) ;;
--bench) pkgs+=(busybox-static python3 runc crun bubblewrap hyperfine docker.io podman) ;;
*) echo "install-deps: unknown option $1 (none, --test or --bench)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "install-deps: need root to install: ${missing[*]}" >&2
		exit 1
	fi
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Go: go.mod needs Go 1.25 or later, newer than Debian's golang-go. When no
# such Go is on PATH or in /usr/local/go, Debian's Go bootstraps the official
# toolchain module (golang.org/toolchain) from the Go module proxy, and it is
# installed into /usr/local/go.
GO_VERSION=${SBX_GO_VERSION:-1.26.8}
GO_ROOT=${SBX_GO_ROOT:-/usr/local/go}
go_ok() { "$1" version 2>/dev/null | grep -qE 'go1\.(2[5-9]|[3-9][0-9])'; }
if ! go_ok "$(command -v go || echo /nonexistent)" && ! go_ok "$GO_ROOT/bin/go"; then
	[[ $(id -u) -eq 0 ]] || { echo "install-deps: need root to install Go" >&2; exit 1; }
	echo "install-deps: installing Go $GO_VERSION into $GO_ROOT"
	export DEBIAN_FRONTEND=noninteractive
	command -v go >/dev/null 2>&1 || { apt-get update -q; apt-get install -y -q --no-install-recommends golang-go unzip ca-certificates; }
	command -v unzip >/dev/null 2>&1 || apt-get install -y -q --no-install-recommends unzip
	arch=$(dpkg --print-architecture)
	mod="golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-${arch}"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	zip=$(cd "$work" && GOPATH="$work/gopath" GOFLAGS=-modcacherw GOTOOLCHAIN=local go mod download -json "$mod" | sed -n 's/.*"Zip": "\(.*\)".*/\1/p')
	[[ -f "$zip" ]] || { echo "install-deps: could not download $mod" >&2; exit 1; }
	unzip -q "$zip" -d "$work/x"
	src="$work/x/$mod"
	chmod +x "$src"/bin/* "$src"/pkg/tool/*/*
	rm -rf "$GO_ROOT.new" && mv "$src" "$GO_ROOT.new"
	rm -rf "$GO_ROOT" && mv "$GO_ROOT.new" "$GO_ROOT"
	go_ok "$GO_ROOT/bin/go" || { echo "install-deps: $GO_ROOT/bin/go does not run" >&2; exit 1; }
fi
if ! command -v go >/dev/null 2>&1 || ! go_ok "$(command -v go)"; then
	echo "install-deps: Go is at $GO_ROOT/bin; put it first on PATH (export PATH=$GO_ROOT/bin:\$PATH)" >&2
fi

# CRIU 4 or later, for the tests of checkpoint, restore and fork: the one on
# PATH when it is recent enough, else Debian trixie's in its own directory
# with a launcher (/usr/local/lib/sbx-criu/bin/criu, which sbx finds); see
# scripts/criu.sh.
if [[ "${1:-}" == "--test" ]]; then
	bash "$(dirname "$0")/criu.sh" >/dev/null
fi
