#!/bin/sh
# pstat.sh ROUNDS REPS NAME=BIN... -- ARGS : interleaved perf stat; median of the rounds' task-clock and faults
rounds=$1 reps=$2; shift 2
bins=""; while [ "$1" != "--" ]; do bins="$bins $1"; shift; done; shift
for r in $(seq $rounds); do for nb in $bins; do n=${nb%%=*}; b=${nb#*=}
  perf stat -x, -r $reps -e task-clock,page-faults $b "$@" 2>&1 >/dev/null | awk -F, -v n=$n '/task-clock/ {t=$1} /page-faults/ {f=$1} END {print n, t, f}'
done; done | python3 -c '
import sys, statistics as S, collections
d = collections.defaultdict(list)
for l in sys.stdin:
    n, t, f = l.split(); d[n].append((float(t), float(f)))
for n, v in d.items():
    ts = [x[0] for x in v]; fs = [x[1] for x in v]
    print(f"{n}: task-clock median {S.median(ts):.2f} ms (min {min(ts):.2f}, max {max(ts):.2f}), page faults {S.median(fs):.0f}, {len(v)} rounds")'
