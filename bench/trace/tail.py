#!/usr/bin/env python3
"""Per-step medians of the runs traced by bench/trace/tail.bt: python3 tail.py ev.txt"""
import sys, statistics as S, collections
runs = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) < 4 or not f[0].isdigit(): continue
    runs[int(f[0])].append((int(f[1]), f[2], " ".join(f[3:])))
marks = [("exec-sbx", lambda e: e.startswith("exec-sbx")),
 ("main.main", lambda e: e == "main.main"),
 ("Host.Run", lambda e: e == "Host.Run"),
 ("rootfs.Prepare", lambda e: e == "rootfs.Prepare"),
 ("isolate.Start", lambda e: e == "isolate.Start"),
 ("lc.exec", lambda e: e == "lc.exec"),
 ("exec init", lambda e: e == "exec /.sbx/init"),
 ("init seccomp", lambda e: e == "seccomp init"),
 ("exec true", lambda e: e == "exec /bin/true"),
 ("exit true", lambda e: e == "exit true"),
 ("init write status", lambda e: e == "write fd3 init"),
 ("init exit_group", lambda e: e == "exit_group init"),
 ("init exit", lambda e: e == "exit init"),
 ("sbx waitid(init)", None),
 ("Usage", lambda e: e == "isolate.Usage"),
 ("Destroy", lambda e: e == "isolate.Destroy"),
 ("sbx exit_group", None),
 ("sbx exit", None)]
d = collections.defaultdict(list)
for r, evs in runs.items():
    sbxpid = next((p for t,p,e in evs if e=="exec-sbx"), None)
    ts = {}
    for name, fn in marks:
        if fn: 
            for t,p,e in evs:
                if fn(e) and name not in ts: ts[name]=t
    ie = ts.get("init exit")
    for t,p,e in evs:
        if p==sbxpid and e.startswith("waitid-ret 0") and ie and t>ie and "sbx waitid(init)" not in ts: ts["sbx waitid(init)"]=t
        if p==sbxpid and e.startswith("exit_group") : ts["sbx exit_group"]=t
        if p==sbxpid and e.startswith("exit "): ts["sbx exit"]=t
    if len(ts) < len(marks): continue
    prev=None
    for name,_ in marks:
        if prev: d[prev+" -> "+name].append((ts[name]-ts[prev])/1000)
        prev=name
    d["TOTAL"].append(ts["sbx exit"]/1000)
for k,v in d.items(): print(f"{k:45s} p50 {S.median(v):6.2f} ms  n={len(v)}")
