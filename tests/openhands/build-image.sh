#!/usr/bin/env bash
# Builds the trees the OpenHands end-to-end tests run, under CACHE_DIR:
#
#   rootfs/      Debian trixie (minbase) with python3.13, bash, git and tmux,
#                user openhands (10001), /workspace/project owned by it, and
#                a venv at /agent-server/.venv with the pinned OpenHands
#                Agent Server, SDK, tools and workspace packages. The
#                commands both OpenHands clients send work in it:
#                /usr/local/bin/openhands-agent-server (the "binary" target)
#                and /agent-server/.venv/bin/python -m openhands.agent_server
#                (the "source" target). The tests import it as an image.
#   agent-tree/  the same Agent Server as a self-contained tree to mount
#                read-only at /agent-server in ANY image: the venv at .venv
#                and the Debian system it needs under sysroot/, its python
#                patched to load its own glibc and libraries from there.
#   app-server/  a venv with the pinned OpenHands app server (openhands-ai,
#                home of RemoteSandboxService), made in the same root; the
#                tests mount it read-only at /opt/openhands-ai in a client
#                sandbox of the image.
#
# Everything comes from Debian's packages and PyPI, pinned by the
# constraints files beside this script. Three caches make rebuilds cheap:
# the debootstrapped base (keyed on its package list), a wheelhouse (every
# wheel downloaded once), and the result (keyed on this script and the
# pins, so a change rebuilds it and an unchanged tree is reused).
#
# Usage: build-image.sh CACHE_DIR   (prints the result's directory)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: build-image.sh CACHE_DIR}
# 1.58.1 and 1.58.2 need certifi>=2026.10.19, which the package index
# reachable here does not have: 1.58.0 is the newest that installs.
OPENHANDS_VERSION=1.58.0
OPENHANDS_AI_VERSION=1.11.0
PACKAGES=python3,python3-venv,bash,git,tmux,ca-certificates,procps,less,patchelf
key=$(cat "$0" "$here"/constraints-agent-server.txt "$here"/constraints-app-server.txt | sha256sum | cut -c1-12)
out="$cache/openhands-$OPENHANDS_VERSION-$key"
base="$cache/trixie-$(echo "$PACKAGES" | sha256sum | cut -c1-12)"
wheels="$cache/wheelhouse"

[[ $(id -u) -eq 0 ]] || { echo "build-image: needs root (debootstrap, chroot)" >&2; exit 1; }
mkdir -p "$cache"
exec 9>"$cache/openhands.lock"
flock 9
if [[ -f "$out/.complete" ]]; then
	echo "$out"
	exit 0
fi
log() { echo "build-image: $(date +%T) $*" >&2; }

# 1. The base: debootstrap, once per package list.
if [[ ! -f "$base/.complete" ]]; then
	mirror=${SBX_DEBIAN_MIRROR:-}
	if [[ -z "$mirror" ]]; then
		mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n' | grep -v security | head -1 || true)
		[[ -n "$mirror" ]] || mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
		[[ -n "$mirror" ]] || { echo "build-image: no Debian mirror in /etc/apt; set SBX_DEBIAN_MIRROR" >&2; exit 1; }
	fi
	log "debootstrap trixie from $mirror"
	rm -rf "$base.tmp"
	debootstrap --variant=minbase --include="$PACKAGES" trixie "$base.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
		{ tail -30 "$cache/debootstrap.log" >&2; exit 1; }
	rm -rf "$base.tmp"/var/cache/apt/archives/*.deb "$base.tmp"/var/lib/apt/lists/*
	touch "$base.tmp/.complete"
	rm -rf "$base"
	mv "$base.tmp" "$base"
fi

tmp="$out.tmp"
root="$tmp/rootfs"
rm -rf "$tmp"
mkdir -p "$tmp"
log "copy the base"
cp -a "$base" "$root"
rm -f "$root/.complete"

# The user the Agent Server image runs as (uid/gid 10001, as upstream's
# Dockerfile), with a home and the workspace it owns.
echo 'openhands:x:10001:10001:OpenHands:/home/openhands:/bin/bash' >>"$root/etc/passwd"
echo 'openhands:x:10001:' >>"$root/etc/group"
echo 'openhands:!:20000::::::' >>"$root/etc/shadow"
mkdir -p "$root/home/openhands" "$root/workspace/project"
chown 10001:10001 "$root/home/openhands" "$root/workspace" "$root/workspace/project"

# pip runs in the root (its python is 3.13; the host has another) in a
# private mount namespace, so /proc and the wheelhouse mount vanish with
# it. It trusts the host's CA bundle (the host may reach PyPI through a
# proxy of its own) and follows the host's index settings, if any.
mkdir -p "$wheels"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$root/tmp/host-ca.crt"
cp "$here"/constraints-*.txt "$root/tmp/"
pip_env=(PIP_CERT=/tmp/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1)
for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT; do
	if [[ -n "${!v:-}" ]]; then pip_env+=("$v=${!v}"); fi
done
in_root() {
	unshare --mount --propagation private -- sh -c '
		root=$1; wheels=$2; shift 2
		mount -t proc proc "$root/proc"
		mkdir -p "$root/wheels"
		mount --bind "$wheels" "$root/wheels"
		exec chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LC_ALL=C.UTF-8 "$@"
	' sh "$root" "$wheels" "${pip_env[@]}" "$@"
}
# pip_install VENV CONSTRAINTS PACKAGE...: bring every wheel into the
# wheelhouse (a package published only as source is built into one there),
# then install from it alone.
pip_install() {
	local venv=$1 constraints=$2
	shift 2
	in_root python3 -m venv "$venv"
	in_root "$venv/bin/pip" wheel -q -w /wheels --find-links /wheels -c "/tmp/$constraints" "$@" >&2
	in_root "$venv/bin/pip" install -q --no-index --find-links /wheels -c "/tmp/$constraints" "$@" >&2
}

log "agent server venv (openhands $OPENHANDS_VERSION)"
pip_install /agent-server/.venv constraints-agent-server.txt \
	"openhands-agent-server==$OPENHANDS_VERSION" "openhands-sdk==$OPENHANDS_VERSION" \
	"openhands-tools==$OPENHANDS_VERSION" "openhands-workspace==$OPENHANDS_VERSION"
in_root /agent-server/.venv/bin/pip freeze --all >"$tmp/freeze-agent-server.txt"
cat >"$root/usr/local/bin/openhands-agent-server" <<'SH'
#!/bin/sh
exec /agent-server/.venv/bin/python -m openhands.agent_server "$@"
SH
chmod 755 "$root/usr/local/bin/openhands-agent-server"

log "app server venv (openhands-ai $OPENHANDS_AI_VERSION)"
pip_install /opt/openhands-ai constraints-app-server.txt "openhands-ai==$OPENHANDS_AI_VERSION"
in_root /opt/openhands-ai/bin/pip freeze --all >"$tmp/freeze-app-server.txt"
mv "$root/opt/openhands-ai" "$tmp/app-server"

rm -rf "$root/wheels" "$root/root/.cache" "$root"/tmp/*
rm -f "$root/etc/resolv.conf"

# The self-contained tree, to be mounted at /agent-server: the venv where
# it is in the image, and the Debian system under sysroot/. Its python
# loads trixie's dynamic loader and libraries from the tree (DT_RPATH also
# covers the extension modules it loads), so the image's own libc, of any
# version or none, does not matter; commands it runs (bash, git, tmux)
# come from the image.
log "self-contained agent tree"
tree="$tmp/agent-tree"
mkdir -p "$tree/sysroot"
cp -a "$root/agent-server/.venv" "$tree/.venv"
cp -a "$root/usr" "$tree/sysroot/usr"
mkdir -p "$tree/sysroot/etc"
cp -a "$root/etc/ssl" "$tree/sysroot/etc/ssl"
sys=/agent-server/sysroot
py="$tree/sysroot/usr/bin/python3.13"
cp "$py" "$root/tmp/python3.13"
in_root patchelf --set-interpreter "$sys/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \
	--set-rpath "$sys/usr/lib/x86_64-linux-gnu" --force-rpath /tmp/python3.13
cp "$root/tmp/python3.13" "$py"
rm -f "$root/tmp/python3.13"
sed -i "s|^home = .*|home = $sys/usr/bin|; s|^executable = .*|executable = $sys/usr/bin/python3.13|; s|^command = .*||" "$tree/.venv/pyvenv.cfg"
for p in python python3 python3.13; do
	ln -sfn "$sys/usr/bin/python3.13" "$tree/.venv/bin/$p"
done

touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
log "done: $(du -sh "$out/rootfs" | cut -f1) root, $(du -sh "$out/agent-tree" | cut -f1) agent tree, $(du -sh "$out/app-server" | cut -f1) app server"
echo "$out"
