#!/usr/bin/env python3
"""Two or more sbx binaries side by side, sample by sample, on one machine.

    sudo bench/abtest/abtest.py [-n 100] [--warmup 5] [--rootfs DIR] [--image] [--userns MODE] NAME=BINARY NAME=BINARY...

Each round runs every binary once per scenario, in a shuffled order, so that
the machine's changing load hits all of them alike (sbx bench interleaves the
runtimes of one run the same way, but cannot compare two builds of sbx, whose
library code differs):

  cold   `sbx run --rootfs DIR true` as a fresh process, until it exits
         (with --image: `sbx run IMAGE true`, DIR imported as an image into
         each binary's store first, as sbx bench's default workload)
  ready  `sbx create --rootfs DIR`, which returns once the executor answers
         (its removal is not timed)
  claim  (with --claim) the same `sbx create` as a fresh process (with --cap-drop NET_RAW),
         which claims a member of a warm pool of its options (daemonless:
         the CLI takes it through the state store); the removal and the
         pool's refill are not timed

Each binary keeps its state under its own directory of a temporary root. It
prints min, p50 and p90 per binary, the ratio of p50s to the first binary and
the median of the paired ratios (second / first), and the load averages seen.
For cold it also prints the CPU time of the run (sbx and every process of the
sandbox, which it reaps: user + system from wait4), which a loaded machine
disturbs far less than the wall time.
"""
import argparse, os, random, shutil, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("-n", type=int, default=100, help="measured rounds")
ap.add_argument("--warmup", type=int, default=5, help="rounds run first and not measured")
ap.add_argument("--rootfs", default="/var/cache/sbx-test/busybox", help="unpacked root with `true`")
ap.add_argument("--claim", action="store_true", help="also time a fresh CLI's claim from a warm pool")
ap.add_argument("--image", action="store_true", help="run DIR imported as an image (sbx run IMAGE) instead of --rootfs DIR")
ap.add_argument("--userns", help="--userns of every run and create (host, private); default sbx's")
ap.add_argument("binaries", nargs="+", help="NAME=PATH of a static sbx binary")
a = ap.parse_args()
bins = dict(b.split("=", 1) for b in a.binaries)
names = list(bins)
tmp = tempfile.mkdtemp(prefix="sbx-abtest-")
runroot = tempfile.mkdtemp(prefix="sbx-abtest-", dir="/run")
os.chmod(runroot, 0o711)  # private user namespaces (the default) reach the run roots below


def sbx(v, *args):
    return [bins[v], "--root", f"{tmp}/{v}", "--run-root", f"{runroot}/{v}", *args]


IMAGE = "abtest/rootfs:latest"


def root_args():
    """The arguments that name the root and set the user namespace."""
    userns = ("--userns", a.userns) if a.userns else ()
    return (*userns, "--pull", "never", IMAGE) if a.image else (*userns, "--rootfs", a.rootfs)


def timed(cmd):
    ms, _, out = timed_cpu(cmd)
    return ms, out


def timed_cpu(cmd):
    """Wall ms, CPU ms of the process and what it reaped, and its output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        ms = (time.perf_counter() - t0) * 1000
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {err.read().decode()}")
        return ms, (ru.ru_utime + ru.ru_stime) * 1000, out.read().decode().strip()


# The pool's options differ from the ready scenario's (capabilities are
# part of a pool's key), so that ready's creates never claim from it.
POOLED = ("--cap-drop", "NET_RAW")
scenarios = ("cold", "ready", "claim") if a.claim else ("cold", "ready")
res = {s: {v: [] for v in names} for s in scenarios}
cpu = {v: [] for v in names}  # cold's
loads = [os.getloadavg()[0]]
try:
    if a.image:
        tar = f"{tmp}/rootfs.tar"
        subprocess.run(["tar", "-C", a.rootfs, "--numeric-owner", "-cf", tar, "."], check=True)
        for v in names:
            timed(sbx(v, "import", "-q", tar, IMAGE))
    if a.claim:
        for v in names:
            timed(sbx(v, "pool", "create", "abtest", "--size", "2", *POOLED, "--rootfs", a.rootfs))
            timed(sbx(v, "pool", "fill", "abtest"))
    for i in range(a.n + a.warmup):
        order = names[:]
        random.shuffle(order)
        for v in order:
            ms, c, _ = timed_cpu(sbx(v, "run", *root_args(), "true"))
            if i >= a.warmup:
                res["cold"][v].append(ms)
                cpu[v].append(c)
        random.shuffle(order)
        for v in order:
            ms, sid = timed(sbx(v, "create", *root_args()))
            subprocess.run(sbx(v, "rm", "-f", sid), capture_output=True)
            if i >= a.warmup:
                res["ready"][v].append(ms)
        if a.claim:
            random.shuffle(order)
            for v in order:
                ms, sid = timed(sbx(v, "create", "--pull", "never", *POOLED, "--rootfs", a.rootfs))
                _, pool = timed(sbx(v, "inspect", "-f", "{{.FromPool}}", sid))
                if pool != "abtest":
                    sys.exit(f"{v}: sbx create did not claim from the pool (pool {pool!r})")
                subprocess.run(sbx(v, "rm", "-f", sid), capture_output=True)
                timed(sbx(v, "pool", "fill", "abtest"))
                if i >= a.warmup:
                    res["claim"][v].append(ms)
        if i % 20 == 0:
            loads.append(os.getloadavg()[0])
finally:
    for v in names:
        if a.claim:
            subprocess.run(sbx(v, "pool", "rm", "abtest"), capture_output=True)
        subprocess.run(sbx(v, "gc"), capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(runroot, ignore_errors=True)
loads.append(os.getloadavg()[0])


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


print(f"{a.n} rounds; 1-minute load average during the run: {min(loads):.1f} to {max(loads):.1f}")
for s, per in res.items():
    ref = statistics.median(per[names[0]])
    for v in names:
        xs = per[v]
        print(f"{s:5} {v:8} min {min(xs):6.1f}  p50 {statistics.median(xs):6.1f}  p90 {q(xs, .9):6.1f} ms"
              f"  p50/{names[0]} {statistics.median(xs) / ref:.2f}")
    if len(names) >= 2:
        r = sorted(y / x for x, y in zip(per[names[0]], per[names[1]]))
        print(f"{s:5} paired {names[1]}/{names[0]}: median {statistics.median(r):.2f} (quartiles {q(r, .25):.2f}-{q(r, .75):.2f})")
ref = statistics.median(cpu[names[0]])
for v in names:
    print(f"cpu   {v:8} p50 {statistics.median(cpu[v]):6.1f} ms of CPU per cold run  p50/{names[0]} {statistics.median(cpu[v]) / ref:.2f}")
if len(names) >= 2:
    r = sorted(y / x for x, y in zip(cpu[names[0]], cpu[names[1]]))
    print(f"cpu   paired {names[1]}/{names[0]}: median {statistics.median(r):.2f} (quartiles {q(r, .25):.2f}-{q(r, .75):.2f})")
