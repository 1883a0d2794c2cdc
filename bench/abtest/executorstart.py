#!/usr/bin/env python3
"""Executor builds side by side: from fork+exec to the first answer.

    bench/abtest/executorstart.py [-n 100] [--warmup 3] NAME=BINARY[,VAR=VALUE...] ...

BINARY is an sbx-executor (internal/helperbin/bin/sbx-executor after `make
helpers`) or an sbx binary: each is started as `BINARY executor --listen-fd
N` on a listening unix socket made before the start, with a health request
already queued on it (as sbx starts a sandbox's PID 1), until the answer
arrives, then killed. VAR=VALUE entries are added to that binary's
environment (GOMAXPROCS=1, say), so one binary can be compared with itself
under two settings. Each round runs every entry once in a shuffled order;
it prints the median wall time and CPU (the child's user+system time from
wait4: its start until the answer) per entry, and the medians of the
paired ratios to the first entry, with the load averages seen.

It runs outside any sandbox, as any user: what it measures is the
executor's own start (Go runtime, package inits, its set-up, the HTTP
answer), not the container's. Its TMPDIR is a private directory, removed
at the end.
"""
import argparse, os, random, shutil, socket, statistics, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("-n", type=int, default=100, help="measured rounds")
ap.add_argument("--warmup", type=int, default=3, help="rounds run first and not measured")
ap.add_argument("entries", nargs="+", help="NAME=BINARY[,VAR=VALUE...]")
a = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="sbx-executorstart-")
entries = {}
for e in a.entries:
    name, _, spec = e.partition("=")
    binary, *env = spec.split(",")
    if not name or not binary:
        sys.exit(f"{e}: want NAME=BINARY[,VAR=VALUE...]")
    full = dict(os.environ, TMPDIR=tmp)
    full.update(kv.split("=", 1) for kv in env)
    entries[name] = (binary, full)
names = list(entries)
wall = {v: [] for v in names}
cpu = {v: [] for v in names}
REQUEST = b"GET /v1/health HTTP/1.1\r\nHost: sandbox\r\n\r\n"


def once(binary, env):
    path = os.path.join(tmp, "executor.sock")
    ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ln.bind(path)
    ln.listen(16)
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "executor", "--listen-fd", str(ln.fileno())], pass_fds=[ln.fileno()],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    c.sendall(REQUEST)
    c.settimeout(30)
    reply = c.recv(4096)
    ms = (time.perf_counter() - t0) * 1000
    c.close()
    ln.close()
    os.unlink(path)
    p.kill()
    _, _, ru = os.wait4(p.pid, 0)
    p.returncode = -9
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if not reply.startswith(b"HTTP/1.1 200"):
        sys.exit(f"{binary}: no health answer: {reply[:200]!r} {err[-500:]}")
    return ms, (ru.ru_utime + ru.ru_stime) * 1000


loads = [os.getloadavg()[0]]
try:
    for i in range(a.n + a.warmup):
        order = names[:]
        random.shuffle(order)
        for v in order:
            ms, cms = once(*entries[v])
            if i >= a.warmup:
                wall[v].append(ms)
                cpu[v].append(cms)
        loads.append(os.getloadavg()[0])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

base = names[0]
print(f"{a.n} rounds; 1-minute load average during the run: {min(loads):.1f} to {max(loads):.1f}")
for v in names:
    line = f"{v:10s} wall p50 {statistics.median(wall[v]):6.2f} ms (min {min(wall[v]):.2f})  cpu p50 {statistics.median(cpu[v]):5.2f} ms"
    if v != base:
        pw = statistics.median(b / x for x, b in zip(wall[base], wall[v]))
        pc = statistics.median(b / x for x, b in zip(cpu[base], cpu[v]) if x > 0)
        line += f"  paired {v}/{base}: wall {pw:.3f} cpu {pc:.3f}"
    print(line)
