#!/usr/bin/env bash
# Measures checkpoint and restore of sandboxes with the sbx CLI, in a root
# of its own, and prints one row per case (medians of N runs):
#   busybox shell:     a busybox sandbox (its executor and a sleeping shell)
#   python 100 MB:     a Python process holding 100 MB it has written
#   fork -n 4:         four copies of the Python sandbox, against 4 cold creates
# Usage: bench/scripts/snapshots.sh SBX BUSYBOX_ROOT DEBIAN_ROOT [N]
# (the test fixtures: /var/cache/sbx-test/busybox and debian-minbase).
set -euo pipefail
sbx=$1 bb=$2 deb=$3 n=${4:-5}
dir=$(mktemp -d /tmp/sbxsnapbench.XXXX)
export SBX_CGROUP_PARENT=sbx-snapbench
S=("$sbx" --root "$dir/root" --run-root "$dir/run")
cleanup() {
	"${S[@]}" rm -f $("${S[@]}" ps -aq) >/dev/null 2>&1 || true
	"${S[@]}" gc >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# case NAME CREATE-ARGS...: checkpoint --leave-running, restore, sizes.
case_() {
	local name=$1; shift
	local id; id=$("${S[@]}" create "$@")
	sleep 1
	local ck=() rs=() sz=()
	for i in $(seq "$n"); do
		t=$(date +%s%N); "${S[@]}" checkpoint --leave-running "$id" "s$i" >/dev/null; ck+=("$(ms "$t")")
		sz+=("$(du -sm "$dir/root/snapshots/s$i" | cut -f1)")
		t=$(date +%s%N); r=$("${S[@]}" restore "s$i"); rs+=("$(ms "$t")")
		"${S[@]}" rm -f "$r" >/dev/null; "${S[@]}" snapshot rm "s$i"
	done
	printf '| %s | %s ms | %s ms | %s MB |\n' "$name" "$(printf '%s\n' "${ck[@]}" | median)" \
		"$(printf '%s\n' "${rs[@]}" | median)" "$(printf '%s\n' "${sz[@]}" | median)"
	"${S[@]}" rm -f "$id" >/dev/null
}

echo "| sandbox | checkpoint --leave-running | restore (until the executor answers) | snapshot size |"
echo "|---|---|---|---|"
case_ "busybox shell" --rootfs "$bb" -- sh -c 'sleep 100000'
py='import time; b = bytearray(100 << 20)
for i in range(0, len(b), 4096): b[i] = 1
time.sleep(100000)'
case_ "python 100 MB" --rootfs "$deb" -m 512m -- python3 -c "$py"

id=$("${S[@]}" create --rootfs "$deb" -m 512m -- python3 -c "$py")
sleep 2
fk=() cold=()
for i in $(seq "$n"); do
	t=$(date +%s%N); ids=$("${S[@]}" fork "$id" -n 4); fk+=("$(ms "$t")")
	"${S[@]}" rm -f $ids >/dev/null
	t=$(date +%s%N)
	c=(); for j in 1 2 3 4; do c+=("$("${S[@]}" create --rootfs "$deb" -m 512m -- python3 -c "$py")"); done
	# a cold create is ready when its command holds its memory too
	for c1 in "${c[@]}"; do until "${S[@]}" exec "$c1" -- sh -c 'test $(ps -o rss= -C python3 | sort -n | tail -1) -gt 100000'; do sleep 0.05; done; done
	cold+=("$(ms "$t")")
	"${S[@]}" rm -f "${c[@]}" >/dev/null
done
echo
echo "| fork of the python 100 MB sandbox | time |"
echo "|---|---|"
printf '| fork -n 4 | %s ms |\n| 4 cold creates, each until its process holds its 100 MB | %s ms |\n' \
	"$(printf '%s\n' "${fk[@]}" | median)" "$(printf '%s\n' "${cold[@]}" | median)"
