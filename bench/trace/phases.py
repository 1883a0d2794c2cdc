#!/usr/bin/env python3
"""Per-phase breakdown of cold sbx starts traced with bench/trace/cold.bt.

    python3 bench/trace/phases.py events.txt

Prints, for every phase of a start, the median and p90 over all complete
runs, the sum of the medians against the median total, the time the
sandbox's processes spent runnable but waiting for a CPU, and the slowest
syscalls by kind.
"""
import collections
import statistics
import sys

SYSCALLS = {165: "mount", 166: "umount2", 155: "pivot_root", 272: "unshare", 308: "setns",
            83: "mkdir", 258: "mkdirat", 84: "rmdir", 59: "execve", 56: "clone", 435: "clone3",
            428: "open_tree", 429: "move_mount", 430: "fsopen", 431: "fsconfig", 432: "fsmount",
            442: "mount_setattr"}


def parse(path):
    runs = collections.defaultdict(lambda: {"ev": [], "sys": [], "q": []})
    with open(path) as f:
        for line in f:
            p = line.split()
            if not p or p[0] not in ("E", "S", "Q") or len(p) < 4:
                continue
            try:
                run = int(p[1])
            except ValueError:
                continue
            if p[0] == "E":
                runs[run]["ev"].append((int(p[2]), int(p[3]), p[4:]))
            elif p[0] == "S":
                runs[run]["sys"].append((int(p[2]), int(p[3]), int(p[4]), int(p[5]), int(p[6])))
            else:
                runs[run]["q"].append((int(p[2]), int(p[3]), int(p[4])))
    return runs


def marks(run):
    """The phase markers of one run: name -> microseconds."""
    m = {}
    ev = sorted(run["ev"])
    sbx = next((pid for t, pid, e in ev if e[0] == "exec-sbx"), None)
    stage2 = None
    cmd = None
    for t, pid, e in ev:
        k = e[0]
        if pid == sbx and k in ("main.main", "Host.Run", "rootfs.Prepare", "isolate.Start", "lc.Create",
                                "lc.Run", "lc.CloneSelfExe", "lc.initProcess.start", "cg.Apply", "cg.Set",
                                "lc.exec", "isolate.Wait", "isolate.Destroy"):
            m.setdefault("sbx." + k, t)
        elif k == "exec" and e[1].startswith("/proc/self/fd/"):
            m.setdefault("stage0.exec", t)
        elif k == "exec" and e[1].startswith("/dev/fd/"):
            m.setdefault("stage0.lcinit", t)
        elif k == "nsexec" and "stage0.exec" in m:
            m.setdefault("stage0.nsexec", t)
        elif k == "fork" and e[2].startswith("runc:[0:PARENT]"):
            m.setdefault("stage1.fork", t)
        elif k == "fork" and e[2].startswith("runc:[1:CHILD]"):
            m.setdefault("stage2.fork", t)
            stage2 = int(e[1])
        elif pid == stage2 and k in ("lc.Init", "lc.prepareRootfs", "lc.finalizeNamespace"):
            m.setdefault("stage2." + k, t)
        elif k == "exec" and pid == stage2:
            m.setdefault("pid1.exec", t)
        elif k == "exec" and stage2 and pid != stage2 and cmd is None:
            cmd = pid
            m["cmd.exec"] = t
        elif k == "exit" and pid == cmd:
            m.setdefault("cmd.exit", t)
        elif k == "exit" and pid == stage2:
            m.setdefault("pid1.exit", t)
        elif k == "exit" and pid == sbx:
            m.setdefault("sbx.exit", t)
    return m


PHASES = [
    ("sbx: exec, Go runtime and package init", None, "sbx.main.main"),
    ("sbx: flags, image lookup, helper install", "sbx.main.main", "sbx.Host.Run"),
    ("sbx: run directory, pipes, overlay", "sbx.Host.Run", "sbx.isolate.Start"),
    ("sbx: libcontainer config and Create", "sbx.isolate.Start", "sbx.lc.Run"),
    ("sbx: sealed binary clone, fork+exec of the init stage", "sbx.lc.Run", "stage0.exec"),
    ("init stage: exec of the program, hand-over to sbx-lcinit", "stage0.exec", "stage0.nsexec"),
    ("init stage: wait for bootstrap data (parent: cgroup attach)", "stage0.nsexec", "stage1.fork"),
    ("init stage: nsexec clones, namespaces", "stage1.fork", "stage2.fork"),
    ("init stage: Go runtime and package init", "stage2.fork", "stage2.lc.Init"),
    ("init stage: config, sync with parent (cgroup set)", "stage2.lc.Init", "stage2.lc.prepareRootfs"),
    ("init stage: mounts, pivot_root, masks", "stage2.lc.prepareRootfs", "stage2.lc.finalizeNamespace"),
    ("init stage: capabilities, exec fifo, exec PID 1", "stage2.lc.finalizeNamespace", "pid1.exec"),
    ("PID 1: Go start, seccomp load, fork+exec command", "pid1.exec", "cmd.exec"),
    ("command: runs and exits", "cmd.exec", "cmd.exit"),
    ("PID 1: reap, report, exit", "cmd.exit", "pid1.exit"),
    ("sbx: wait, teardown, report, exit", "pid1.exit", "sbx.exit"),
]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    runs = parse(sys.argv[1])
    per_phase = collections.defaultdict(list)
    totals, runq, sys_by = [], [], collections.defaultdict(list)
    parent_side = collections.defaultdict(list)
    complete = 0
    for r in runs.values():
        m = marks(r)
        need = [b for _, a, b in PHASES] + [a for _, a, b in PHASES if a]
        if any(k not in m for k in need):
            continue
        complete += 1
        for name, a, b in PHASES:
            per_phase[name].append(m[b] - (m[a] if a else 0))
        totals.append(m["sbx.exit"])
        runq.append(sum(w for _, _, w in r["q"]) / 1000.0)
        for t, pid, nr, d, ret in r["sys"]:
            sys_by[SYSCALLS.get(nr, str(nr))].append(d)
        for k in ("sbx.lc.initProcess.start", "sbx.cg.Apply", "sbx.cg.Set", "sbx.lc.exec"):
            if k in m:
                parent_side[k].append(m[k] - m["stage0.exec"])
    if not complete:
        sys.exit("no complete run in the trace")
    print(f"{complete} complete runs; total (exec of sbx to its exit) median {statistics.median(totals)/1000:.2f} ms,"
          f" p90 {pct(totals, 0.9)/1000:.2f} ms")
    print(f"{'phase':62} {'p50 ms':>7} {'p90 ms':>7}")
    s = 0
    for name, _, _ in PHASES:
        med = statistics.median(per_phase[name]) / 1000
        s += med
        print(f"{name:62} {med:7.2f} {pct(per_phase[name], 0.9)/1000:7.2f}")
    print(f"{'sum of medians':62} {s:7.2f}")
    print(f"runnable but waiting for a CPU, all processes of a run: median {statistics.median(runq):.2f} ms")
    print("parent (sbx) during the init stage, from the init stage's exec (ms, median):",
          ", ".join(f"{k.split('.', 1)[1]} {statistics.median(v)/1000:+.2f}" for k, v in parent_side.items()))
    print("syscalls of all runs: count per run, median us, sum per run ms")
    for name, ds in sorted(sys_by.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:14} {len(ds)/complete:6.1f} {statistics.median(ds):8.0f} {sum(ds)/complete/1000:8.2f}")


if __name__ == "__main__":
    main()
