#!/usr/bin/env python3
"""The exec and session round trips of two or more sbx builds, round by round.

    sudo bench/abtest/roundtrip.py [-r 8] [-n 50] NAME=BINARY NAME=BINARY...

abtest.py times whole CLI processes (cold, ready); the round trips are
measured inside `sbx bench` (exec: one /v1/exec of `true` through the
executor client; session: one shell-session command). Each round runs
`sbx bench --samples N exec session` once per binary, in a shuffled order,
so that the machine's changing load hits all builds alike. It prints each
build's p50 over all samples, the ratio to the first build, the median of
the per-round ratios of p50s, and the load averages seen.
"""
import argparse, json, os, random, shutil, statistics, subprocess, sys, tempfile

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("-r", type=int, default=8, help="rounds")
ap.add_argument("-n", type=int, default=50, help="measured samples per scenario and round")
ap.add_argument("--scenarios", default="exec,session", help="comma-separated sbx bench scenarios")
ap.add_argument("binaries", nargs="+", help="NAME=PATH of a static sbx binary")
a = ap.parse_args()
bins = dict(b.split("=", 1) for b in a.binaries)
names = list(bins)
scenarios = a.scenarios.split(",")
tmp = tempfile.mkdtemp(prefix="sbx-roundtrip-")
samples = {s: {v: [] for v in names} for s in scenarios}
rounds = {s: {v: [] for v in names} for s in scenarios}
loads = [os.getloadavg()[0]]
try:
    for i in range(a.r):
        order = names[:]
        random.shuffle(order)
        for v in order:
            out = f"{tmp}/{v}-{i}.json"
            cmd = [bins[v], "--root", f"{tmp}/root-{v}", "--run-root", f"/run/sbx-rt-{os.getpid()}-{v}",
                   "bench", "--samples", str(a.n), "--warmup", "5", "--json", out, *scenarios]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-2000:]}")
            rep = json.load(open(out))
            for sc in rep["scenarios"]:
                sub = next(s for s in sc["subjects"] if s["name"] == "sbx")
                vals = sub["samples"]
                samples[sc["name"]][v] += vals
                rounds[sc["name"]][v].append(statistics.median(vals))
        loads.append(os.getloadavg()[0])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print(f"{a.r} rounds of {a.n} samples per build; load average {min(loads):.2f}-{max(loads):.2f}")
for s in scenarios:
    base = statistics.median(samples[s][names[0]])
    for v in names:
        p50 = statistics.median(samples[s][v])
        paired = statistics.median(b / f for b, f in zip(rounds[s][v], rounds[s][names[0]]))
        print(f"{s:8s} {v:10s} p50 {p50:.3f} ms  p50/{names[0]} {p50 / base:.2f}  paired per-round ratio {paired:.2f}")
