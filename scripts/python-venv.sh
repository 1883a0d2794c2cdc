#!/usr/bin/env bash
# Makes (once) the Python venv the SDK's tests run in, with the pinned
# packages of sdk/python/requirements-test.txt from PyPI, and prints its
# path. The venv lives in a cache outside the checkout, keyed on the Python
# version and the requirements, so the host's Python stays clean and fresh
# clones on the same machine reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

req=sdk/python/requirements-test.txt
py=${SBX_PYTHON:-python3}
cache=${SBX_TEST_CACHE:-/var/cache/sbx-test}
command -v "$py" >/dev/null || { echo "python-venv: $py not found (make deps-test installs python3)" >&2; exit 1; }
key=$({ "$py" -c 'import sys; print(sys.version)'; cat "$req"; } | sha256sum | cut -c1-16)
venv="$cache/pyvenv-$key"

if [[ ! -f "$venv/.complete" ]]; then
	mkdir -p "$cache"
	exec 9>"$cache/pyvenv.lock"
	flock 9
	if [[ ! -f "$venv/.complete" ]]; then
		echo "python-venv: creating $venv" >&2
		# A venv cannot be moved (its scripts name its directory): an
		# interrupted one has no .complete and is made again.
		rm -rf "$venv"
		"$py" -m venv "$venv" >&2
		"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
		touch "$venv/.complete"
	fi
fi
echo "$venv"
