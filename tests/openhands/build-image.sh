#!/usr/bin/env bash
# Builds the trees the OpenHands end-to-end tests run, under CACHE_DIR:
#
#   rootfs/        Debian trixie (minbase) with python3.13, bash, git and tmux,
#                  user openhands (10001), /workspace/project owned by it, and
#                  a venv at /agent-server/.venv with the pinned OpenHands
#                  Agent Server, SDK, tools and workspace packages. The
#                  commands both OpenHands clients send work in it:
#                  /usr/local/bin/openhands-agent-server (the "binary" target)
#                  and /agent-server/.venv/bin/python -m openhands.agent_server
#                  (the "source" target). Imported by the tests as an image.
#   app-server/    a venv with the pinned OpenHands app server (openhands-ai,
#                  home of RemoteSandboxService), made in the same root; the
#                  tests mount it read-only at /opt/openhands-ai in a client
#                  sandbox of the image.
#
# Everything comes from Debian's packages and PyPI, pinned by the
# constraints files beside this script. The result is keyed on this script
# and those files, so a change rebuilds it and an unchanged tree is reused.
# Usage: build-image.sh CACHE_DIR  (prints the tree's directory)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: build-image.sh CACHE_DIR}
# 1.58.1 and 1.58.2 need certifi>=2026.10.19, which the package index
# reachable here does not have: 1.58.0 is the newest that installs.
OPENHANDS_VERSION=1.58.0
OPENHANDS_AI_VERSION=1.11.0
key=$(cat "$0" $(ls "$here"/constraints-*.txt 2>/dev/null) | sha256sum | cut -c1-12)
out="$cache/openhands-$OPENHANDS_VERSION-$key"

[[ $(id -u) -eq 0 ]] || { echo "build-image: needs root (debootstrap, chroot)" >&2; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/openhands.lock"
flock 9
if [[ -f "$out/.complete" ]]; then
	echo "$out"
	exit 0
fi

log() { echo "build-image: $*" >&2; }
mirror=${SBX_DEBIAN_MIRROR:-}
if [[ -z "$mirror" ]]; then
	mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n' | grep -v security | head -1 || true)
	[[ -n "$mirror" ]] || mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
	[[ -n "$mirror" ]] || { echo "build-image: no Debian mirror in /etc/apt; set SBX_DEBIAN_MIRROR" >&2; exit 1; }
fi

# A build that failed after debootstrap resumes from its root (the steps
# after it are idempotent).
tmp="$out.tmp"
root="$tmp/rootfs"
if [[ ! -f "$tmp/debootstrap.done" ]]; then
	rm -rf "$tmp"
	mkdir -p "$tmp"
	log "debootstrap trixie from $mirror into $root"
	debootstrap --variant=minbase --include=python3,python3-venv,bash,git,tmux,ca-certificates,procps,less \
		trixie "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1 || { tail -30 "$tmp/debootstrap.log" >&2; exit 1; }
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	touch "$tmp/debootstrap.done"
fi

# The user the Agent Server image runs as (uid/gid 10001, as upstream's
# Dockerfile), with a home and the workspace it owns.
if ! grep -q '^openhands:' "$root/etc/passwd"; then
	echo 'openhands:x:10001:10001:OpenHands:/home/openhands:/bin/bash' >>"$root/etc/passwd"
	echo 'openhands:x:10001:' >>"$root/etc/group"
	echo 'openhands:!:20000::::::' >>"$root/etc/shadow"
fi
mkdir -p "$root/home/openhands" "$root/workspace/project"
chown 10001:10001 "$root/home/openhands" "$root/workspace" "$root/workspace/project"

# pip runs in the root (its python is 3.13; the host has another) in a
# private mount namespace, so /proc and the pip cache vanish with it. It
# trusts the host's CA bundle (the host may reach PyPI through a proxy of
# its own) and follows the host's index settings, if any.
mkdir -p "$cache/pip"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/tmp/host-ca.crt"
pip_env=(PIP_CERT=/tmp/host-ca.crt)
for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT; do
	[[ -n "${!v:-}" ]] && pip_env+=("$v=${!v}")
done
in_root() {
	unshare --mount --propagation private -- sh -c '
		root=$1; cache=$2; shift 2
		mount -t proc proc "$root/proc"
		mkdir -p "$root/root/.cache/pip"
		mount --bind "$cache" "$root/root/.cache/pip"
		exec chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LC_ALL=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"
	' sh "$root" "$cache/pip" "${pip_env[@]}" "$@"
}
cp "$here/constraints-agent-server.txt" "$root/tmp/constraints.txt" 2>/dev/null || : >"$root/tmp/constraints.txt"
log "agent server venv (openhands $OPENHANDS_VERSION)"
in_root python3 -m venv /agent-server/.venv
in_root /agent-server/.venv/bin/pip install -q -c /tmp/constraints.txt \
	"openhands-agent-server==$OPENHANDS_VERSION" "openhands-sdk==$OPENHANDS_VERSION" \
	"openhands-tools==$OPENHANDS_VERSION" "openhands-workspace==$OPENHANDS_VERSION" >&2
in_root /agent-server/.venv/bin/pip freeze --all >"$tmp/freeze-agent-server.txt"
cat >"$root/usr/local/bin/openhands-agent-server" <<'SH'
#!/bin/sh
exec /agent-server/.venv/bin/python -m openhands.agent_server "$@"
SH
chmod 755 "$root/usr/local/bin/openhands-agent-server"

log "app server venv (openhands-ai $OPENHANDS_AI_VERSION)"
cp "$here/constraints-app-server.txt" "$root/tmp/constraints.txt" 2>/dev/null || : >"$root/tmp/constraints.txt"
rm -rf "$tmp/app-server"
in_root python3 -m venv /opt/openhands-ai
in_root /opt/openhands-ai/bin/pip install -q -c /tmp/constraints.txt "openhands-ai==$OPENHANDS_AI_VERSION" >&2
in_root /opt/openhands-ai/bin/pip freeze --all >"$tmp/freeze-app-server.txt"
mv "$root/opt/openhands-ai" "$tmp/app-server"

rm -f "$root/tmp/constraints.txt" "$root/tmp/host-ca.crt" "$root/etc/resolv.conf"
rm -rf "$root/root/.cache"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
log "done: $(du -sh "$out/rootfs" | cut -f1) root, $(du -sh "$out/app-server" | cut -f1) app server"
echo "$out"
