#!/usr/bin/env bash
# Installs the Debian packages sbx needs to build and test; with --bench also
# the runtimes `sbx bench` compares against. Idempotent: installs only what is
# missing, so a fresh Debian machine needs nothing by hand.
set -euo pipefail

pkgs=(gcc libc6-dev make pkg-config libseccomp-dev git busybox-static debootstrap
      iproute2 nftables iptables procps python3 tar skopeo umoci)
if [[ "${1:-}" == "--bench" ]]; then
	pkgs+=(runc crun bubblewrap hyperfine docker.io podman)
fi

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

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	echo "install-deps: Go is at /usr/local/go/bin; add it to PATH" >&2
fi
