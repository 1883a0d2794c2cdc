#!/usr/bin/env bash
# Provides a CRIU 4.2 or later for sbx checkpoint, restore and fork, and
# prints the path sbx runs. A `criu` on PATH that is 4.2 or later and passes
# `criu check` is used as it is. Otherwise Debian's criu package (from the
# suite SBX_CRIU_SUITE) and the libraries it needs are downloaded with apt
# (that suite configured for this download only; nothing is installed into
# the host's system), unpacked into their own directory, and started by a
# small launcher through the package's own dynamic loader and library path.
# Why 4.2: Debian bookworm's criu 3.17 cannot checkpoint on current kernels
# (vDSO), and trixie's 4.1 cannot dump a TCP socket on Linux 6.16 and later
# (getsockopt SO_PASSCRED fails with EOPNOTSUPP there).
#
#   SBX_CRIU_DIR        where the tree and launcher go (default /usr/local/lib/sbx-criu;
#                       the launcher is $SBX_CRIU_DIR/bin/criu, which sbx finds there)
#   SBX_CRIU_SUITE      the Debian suite to take criu from (default forky: 4.2.1)
#   SBX_DEBIAN_MIRROR   the Debian mirror (default: the first one in /etc/apt)
set -euo pipefail

dir=${SBX_CRIU_DIR:-/usr/local/lib/sbx-criu}
suite=${SBX_CRIU_SUITE:-forky}
launcher="$dir/bin/criu"

criu_ok() { # a CRIU 4.2+ that can checkpoint on this kernel
	"$1" --version 2>/dev/null | grep -qE '^Version: *(4\.([2-9]|[1-9][0-9])|[5-9]\.|[1-9][0-9]\.)' && "$1" check >/dev/null 2>&1
}

if path=$(command -v criu 2>/dev/null) && criu_ok "$path"; then
	echo "$path"
	exit 0
fi
if [[ -x "$launcher" ]] && criu_ok "$launcher"; then
	echo "$launcher"
	exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "criu.sh: need root to install CRIU into $dir" >&2; exit 1; }
arch=$(dpkg --print-architecture)
case "$arch" in
amd64) triplet=x86_64-linux-gnu loader=usr/lib64/ld-linux-x86-64.so.2 ;;
arm64) triplet=aarch64-linux-gnu loader=usr/lib/ld-linux-aarch64.so.1 ;;
*) echo "criu.sh: no launcher recipe for $arch; install a CRIU 4 and put it on PATH" >&2; exit 1 ;;
esac

mirror=${SBX_DEBIAN_MIRROR:-}
if [[ -z "$mirror" ]]; then
	mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n' | grep -v security | head -1 || true)
	[[ -n "$mirror" ]] || mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
	[[ -n "$mirror" ]] || { echo "criu.sh: no Debian mirror in /etc/apt; set SBX_DEBIAN_MIRROR" >&2; exit 1; }
fi

mkdir -p "$(dirname "$dir")"
exec 9>"$(dirname "$dir")/.sbx-criu.lock"
flock 9
work=$(mktemp -d)
trap 'rm -rf "$work" "$dir.new"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/prefs" "$work/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$work/sources.list"
# apt's own state (lists, cache, status, preferences) all point into $work:
# the host's sources, package database and installed packages are untouched.
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Dir::State::status=/dev/null
	-o Dir::Etc::Preferences=/dev/null -o "Dir::Etc::PreferencesParts=$work/prefs"
	-o "APT::Architecture=$arch" -o APT::Sandbox::User=root -q)
echo "criu.sh: fetching Debian $suite's criu into $dir" >&2
apt-get "${apt_opts[@]}" update >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; exit 1; }
# criu and what it depends on (Depends and Pre-Depends: libraries only).
mapfile -t pkgs < <(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests \
	--no-conflicts --no-breaks --no-replaces --no-enhances criu | grep -v '^[ <]' | sort -u)
[[ ${#pkgs[@]} -gt 0 ]] || { echo "criu.sh: $suite has no criu package at $mirror" >&2; exit 1; }
(cd "$work/debs" && apt-get "${apt_opts[@]}" download "${pkgs[@]}") >>"$work/apt.log" 2>&1 ||
	{ tail -20 "$work/apt.log" >&2; exit 1; }
rm -rf "$dir.new"
mkdir -p "$dir.new/bin"
for deb in "$work"/debs/*.deb; do
	dpkg-deb -x "$deb" "$dir.new"
done
cat >"$dir.new/bin/criu" <<EOF
#!/bin/sh
# Debian $suite's criu, run through its own loader and libraries
# (installed by sbx's scripts/criu.sh; remove $dir to remove it).
d=$dir
exec "\$d/$loader" --library-path "\$d/usr/lib/$triplet:\$d/lib/$triplet" "\$d/usr/sbin/criu" "\$@"
EOF
chmod 0755 "$dir.new/bin/criu"
(cd "$work/debs" && ls) >"$dir.new/PACKAGES"
rm -rf "$dir.old"
[[ ! -e "$dir" ]] || mv "$dir" "$dir.old"
mv "$dir.new" "$dir"
rm -rf "$dir.old"
criu_ok "$launcher" || { echo "criu.sh: $launcher does not pass 'criu check':" >&2; "$launcher" check >&2 || true; exit 1; }
echo "criu.sh: $("$launcher" --version | head -1) at $launcher" >&2
echo "$launcher"
