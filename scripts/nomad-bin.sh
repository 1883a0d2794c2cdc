#!/usr/bin/env bash
# Prints the path of the pinned Nomad agent that the Nomad driver's
# end-to-end tests run, building it on first use. Nomad is not packaged by
# Debian, so it is built from the Go module proxy by the helper module
# nomad-driver/tools/nomad (pinned version, copied replace directives,
# committed go.sum). The build takes about 5 minutes of two cores, so the
# binary is cached outside the checkout, keyed on the version and on the
# helper module's go.mod and go.sum: a changed pin builds a new binary.
#
#   SBX_TEST_CACHE   cache directory (default /var/cache/sbx-test)
set -euo pipefail
cd "$(dirname "$0")/../nomad-driver/tools/nomad"
export PATH="/usr/local/go/bin:$PATH"

version=$(sed -n 's|^require github.com/hashicorp/nomad \(v[0-9.]*\)$|\1|p' go.mod)
[[ -n "$version" ]] || { echo "nomad-bin: no Nomad version pinned in $PWD/go.mod" >&2; exit 1; }
key=$(cat go.mod go.sum | sha256sum | cut -c1-12)
cache=${SBX_TEST_CACHE:-/var/cache/sbx-test}
bin="$cache/nomad-$version-$key"

if [[ ! -x "$bin" ]]; then
	mkdir -p "$cache"
	# One build at a time on a machine shared by several test runs.
	exec 9>"$cache/nomad-build.lock"
	flock 9
	if [[ ! -x "$bin" ]]; then
		echo "nomad-bin: building Nomad $version into $bin (first time on this machine: about 5 minutes)" >&2
		start=$SECONDS
		CGO_ENABLED=1 GOFLAGS=-mod=readonly go build -trimpath -ldflags '-s -w' -o "$bin.tmp" github.com/hashicorp/nomad
		mv -f "$bin.tmp" "$bin"
		echo "nomad-bin: built Nomad $version in $((SECONDS - start)) s" >&2
	fi
	exec 9>&-
fi
"$bin" version | grep -q "^Nomad $version\$" || { echo "nomad-bin: $bin is not Nomad $version" >&2; exit 1; }
echo "$bin"
