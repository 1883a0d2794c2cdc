package snapshots

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// counterProg is a Python process with state in four places: a counter in
// memory, an open file it appends the counter to, a child process, and a
// listening TCP socket that reports them ("N|CHILD|VALUE|FILE"; "set V"
// stores V in memory).
const counterProg = `
import os, socket, time
f = open('/tmp/counter.log', 'a')
child = os.fork()
if child == 0:
    while True:
        time.sleep(1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 7070))
s.listen(8)
s.settimeout(0.05)
n, v = 0, '-'
while True:
    n += 1
    f.write('%d\n' % n)
    f.flush()
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    req = c.recv(100).decode().strip()
    if req.startswith('set '):
        v = req[4:]
    c.sendall(('%d|%d|%s|%s\n' % (n, child, v, os.readlink('/proc/self/fd/%d' % f.fileno()))).encode())
    c.close()
    print('served', n, flush=True)
`

// counterQuery asks counterProg (argv[1]: "get" or "set V"), checks that
// its child lives and that the file it appends to has its counter, and
// prints "N VALUE FILE".
const counterQuery = `
import os, socket, sys
c = socket.create_connection(('127.0.0.1', 7070), timeout=10)
c.sendall((sys.argv[1] + '\n').encode())
r = c.makefile().readline().strip().split('|')
n, child = int(r[0]), int(r[1])
os.kill(child, 0)
last = int(open('/tmp/counter.log').read().split()[-1])
assert last >= n, (last, n)
print(n, r[2], r[3])
`

type counterState struct {
	n     int
	value string
	file  string
}

// queryCounter runs counterQuery in sandbox id.
func queryCounter(t *testing.T, h *harness.Host, id, req string) counterState {
	t.Helper()
	out := h.Must(t, "exec", id, "--", "python3", "-c", counterQuery, req)
	f := strings.Fields(out)
	if len(f) != 3 {
		t.Fatalf("counter query in %s: %q", id, out)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("counter query in %s: %q", id, out)
	}
	return counterState{n: n, value: f[1], file: f[2]}
}

// createCounter creates a Debian sandbox whose main command is counterProg
// and waits until it answers.
func createCounter(t *testing.T, h *harness.Host, args ...string) string {
	t.Helper()
	args = append(append([]string{"create", "--userns", "host", "--rootfs", fixture.DebianRootfs(t)}, args...), "--", "python3", "-c", counterProg)
	id := strings.TrimSpace(h.Must(t, args...))
	h.Saw(id)
	h.Must(t, "exec", id, "--", "python3", "-c", `
import socket, time
for i in range(200):
    try:
        socket.create_connection(('127.0.0.1', 7070), timeout=1).close()
        break
    except OSError:
        time.sleep(0.05)
`)
	return id
}

// Twenty checkpoint and restore cycles of a Python process: every other
// cycle checkpoints into a named snapshot, removes the sandbox and
// restores the snapshot as a new one; the others stop with --checkpoint
// and start in place. After each, the counter in memory has gone on, the
// file is still open and has it, the child lives, the socket answers; the
// main command's log keeps working.
func TestSnapshotCheckpointRestoreCycles(t *testing.T) {
	h := harness.NewHost(t)
	id := createCounter(t, h, "--name", "py0")
	prev := queryCounter(t, h, id, "set kept")
	for i := 1; i <= 20; i++ {
		if i%2 == 0 {
			snap := "cycle" + strconv.Itoa(i)
			if out := strings.TrimSpace(h.Must(t, "checkpoint", id, snap)); out != snap {
				t.Fatalf("cycle %d: checkpoint printed %q", i, out)
			}
			if st := h.Inspect(t, id).Status; st != "stopped" {
				t.Fatalf("cycle %d: checkpointed sandbox is %s, want stopped", i, st)
			}
			h.Must(t, "rm", "-f", id) // a restore needs nothing of the source
			id = strings.TrimSpace(h.Must(t, "restore", snap, "--name", "py"+strconv.Itoa(i)))
			h.Saw(id)
			h.Must(t, "snapshot", "rm", snap)
		} else {
			h.Must(t, "stop", "--checkpoint", id)
			h.Must(t, "start", id)
		}
		got := queryCounter(t, h, id, "get")
		if got.n <= prev.n {
			t.Fatalf("cycle %d: the counter went from %d to %d", i, prev.n, got.n)
		}
		if got.value != "kept" || got.file != "/tmp/counter.log" {
			t.Fatalf("cycle %d: memory value %q, open file %q", i, got.value, got.file)
		}
		prev = got
	}
	logs := h.Must(t, "logs", id)
	if !strings.Contains(logs, "served "+strconv.Itoa(prev.n)+"\n") {
		t.Fatalf("main command's log after the cycles lacks its last answer (%d): %.300q", prev.n, logs)
	}
	if out := h.Must(t, "snapshot", "ls"); strings.Count(out, "\n") != 1 {
		t.Fatalf("snapshots left after the cycles:\n%s", out)
	}
}

// fork -n 3 gives three running copies, each with its own id, memory,
// files and network; the source runs on unchanged.
func TestSnapshotForkIndependence(t *testing.T) {
	h := harness.NewHost(t)
	src := createCounter(t, h)
	queryCounter(t, h, src, "set source")
	h.Must(t, "exec", src, "--", "sh", "-c", "echo source > /tmp/who")
	ids := strings.Fields(h.Must(t, "fork", src, "-n", "3"))
	if len(ids) != 3 {
		t.Fatalf("fork -n 3 printed %q", ids)
	}
	seen := map[string]bool{src: true}
	for i, id := range ids {
		h.Saw(id)
		if seen[id] || len(id) != 32 {
			t.Fatalf("fork gave id %q twice or malformed", id)
		}
		seen[id] = true
		if got := queryCounter(t, h, id, "get"); got.value != "source" {
			t.Fatalf("copy %d starts with memory %q, want the source's", i, got.value)
		}
		v := "copy" + strconv.Itoa(i)
		queryCounter(t, h, id, "set "+v)
		h.Must(t, "exec", id, "--", "sh", "-c", "echo "+v+" > /tmp/who")
	}
	for i, id := range ids {
		v := "copy" + strconv.Itoa(i)
		if got := queryCounter(t, h, id, "get"); got.value != v {
			t.Fatalf("copy %d has memory %q, want %q", i, got.value, v)
		}
		if out := h.Must(t, "exec", id, "cat", "/tmp/who"); out != v+"\n" {
			t.Fatalf("copy %d has file %q, want %q", i, out, v)
		}
	}
	if got := queryCounter(t, h, src, "get"); got.value != "source" {
		t.Fatalf("the source's memory became %q", got.value)
	}
	if out := h.Must(t, "exec", src, "cat", "/tmp/who"); out != "source\n" {
		t.Fatalf("the source's file became %q", out)
	}
	if out := h.Must(t, "snapshot", "ls"); strings.Count(out, "\n") != 1 {
		t.Fatalf("fork left its snapshot:\n%s", out)
	}
}

// A snapshot exported from one root imports into another and restores
// there after its source is gone; a truncated archive, a changed file and
// a snapshot of a newer format are refused, leaving nothing behind.
func TestSnapshotExportImport(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--userns", "host")
	h.Must(t, "exec", id, "--", "sh", "-c", "echo state > /root/f; (i=0; while true; do i=$((i+1)); echo $i > /tmp/loop; sleep 0.1; done) </dev/null >/dev/null 2>&1 &")
	h.Must(t, "checkpoint", "--leave-running", id, "s1")
	if st := h.Inspect(t, id).Status; st != "running" {
		t.Fatalf("--leave-running left the sandbox %s", st)
	}
	if out := h.Must(t, "exec", id, "cat", "/root/f"); out != "state\n" {
		t.Fatalf("source after --leave-running: %q", out)
	}
	file := filepath.Join(t.TempDir(), "s1.snap")
	h.Must(t, "snapshot", "export", "s1", "-o", file)
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("export: %v (mode %v), want a file of mode 0600", err, fi)
	}
	h.Must(t, "rm", "-f", id)

	h2 := harness.NewHost(t)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(t.TempDir(), "trunc.snap")
	if err := os.WriteFile(trunc, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h2.Sbx(t, "", "snapshot", "import", trunc); r.Code == 0 || !strings.Contains(r.Stderr, "truncated or damaged") {
		t.Fatalf("import of a truncated archive: exit %d, %s", r.Code, r.Stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(h2.Root, "snapshots")); len(entries) != 0 {
		t.Fatalf("a failed import left %d entries", len(entries))
	}
	if out := strings.TrimSpace(h2.Must(t, "snapshot", "import", file, "--name", "moved")); out != "moved" {
		t.Fatalf("import printed %q", out)
	}
	r1 := strings.TrimSpace(h2.Must(t, "restore", "moved"))
	h2.Saw(r1)
	if out := h2.Must(t, "exec", r1, "cat", "/root/f"); out != "state\n" {
		t.Fatalf("restored file: %q", out)
	}
	a := h2.Must(t, "exec", r1, "cat", "/tmp/loop")
	h2.Must(t, "exec", r1, "sleep", "0.5")
	if b := h2.Must(t, "exec", r1, "cat", "/tmp/loop"); b == a {
		t.Fatalf("the restored loop does not run: %q then %q", a, b)
	}
	h2.Must(t, "rm", "-f", r1)

	// A changed file: refused.
	layer := filepath.Join(h2.Root, "snapshots", "moved", "layer.tar")
	f, err := os.OpenFile(layer, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	if r := h2.Sbx(t, "", "restore", "moved"); r.Code == 0 || !strings.Contains(r.Stderr, "changed on disk") {
		t.Fatalf("restore of a changed snapshot: exit %d, %s", r.Code, r.Stderr)
	}
	// A newer format: refused, saying so.
	h2.Must(t, "snapshot", "import", file, "--name", "newer")
	rec := filepath.Join(h2.Root, "snapshots", "newer", "snapshot.json")
	var m map[string]any
	raw, _ := os.ReadFile(rec)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["format"] = 99
	raw, _ = json.Marshal(m)
	if err := os.WriteFile(rec, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := h2.Sbx(t, "", "restore", "newer"); r.Code == 0 || !strings.Contains(r.Stderr, "newer sbx") {
		t.Fatalf("restore of a newer format: exit %d, %s", r.Code, r.Stderr)
	}
	if r := h2.Sbx(t, "", "restore", "nosuch"); r.Code == 0 || !strings.Contains(r.Stderr, `no snapshot "nosuch"`) {
		t.Fatalf("restore of a missing snapshot: exit %d, %s", r.Code, r.Stderr)
	}
	if out := h2.Must(t, "ps", "-aq"); out != "" {
		t.Fatalf("failed restores left sandboxes: %q", out)
	}
	// gc removes a snapshot whose builder died.
	partial := filepath.Join(h2.Root, "snapshots", ".partial-dead-1")
	if err := os.MkdirAll(partial, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(partial, ".lock"), nil, 0o600)
	if out := h2.Must(t, "gc"); !strings.Contains(out, "removed partial snapshots: 1") {
		t.Fatalf("gc: %q", out)
	}
}

// A sandbox stopped by stop --checkpoint whose snapshot was removed
// meanwhile starts anew.
func TestSnapshotStartAfterCheckpointRemoved(t *testing.T) {
	h := harness.NewHost(t)
	id := h.Create(t, "--userns", "host")
	h.Must(t, "exec", id, "--", "sh", "-c", "echo kept > /root/f")
	h.Must(t, "stop", "--checkpoint", id)
	sb := h.Inspect(t, id)
	if sb.Checkpoint == "" {
		t.Fatal("stop --checkpoint recorded no checkpoint")
	}
	h.Must(t, "snapshot", "rm", sb.Checkpoint)
	h.Must(t, "start", id)
	if out := h.Must(t, "exec", id, "cat", "/root/f"); out != "kept\n" {
		t.Fatalf("the writable layer after a fresh start: %q", out)
	}
	if sb := h.Inspect(t, id); sb.Checkpoint != "" || sb.Status != "running" {
		t.Fatalf("after the start: %s, checkpoint %q", sb.Status, sb.Checkpoint)
	}
}

// A restore whose root directory is gone fails clearly and leaves nothing.
func TestSnapshotRestoreMissingRoot(t *testing.T) {
	h := harness.NewHost(t)
	root := fixture.NewBusyboxRootfs(t, filepath.Join(t.TempDir(), "root"))
	id := strings.TrimSpace(h.Must(t, "create", "--userns", "host", "--rootfs", root))
	h.Saw(id)
	h.Must(t, "checkpoint", id, "s")
	h.Must(t, "rm", "-f", id)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if r := h.Sbx(t, "", "restore", "s"); r.Code == 0 || !strings.Contains(r.Stderr, "root directory") {
		t.Fatalf("restore without its root: exit %d, %s", r.Code, r.Stderr)
	}
	if out := h.Must(t, "ps", "-aq"); out != "" {
		t.Fatalf("the failed restore left sandboxes: %q", out)
	}
}

// A sandbox's /etc files are hostile input to its restore, which writes
// /etc/hostname, hosts and resolv.conf into the restored writable layer on
// the host: a FIFO there does not hang the restore, a symlink is replaced,
// not followed; an /etc that is a symlink to a host directory is refused
// and nothing is written to that directory.
func TestSnapshotRestoreHostileEtc(t *testing.T) {
	h := harness.NewHost(t)
	root := fixture.NewBusyboxRootfs(t, filepath.Join(t.TempDir(), "root"))
	hostDir := t.TempDir() // stands for the host's /etc
	hostFile := filepath.Join(hostDir, "hosts")
	if err := os.WriteFile(hostFile, []byte("host's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	create := func(script string) string {
		id := strings.TrimSpace(h.Must(t, "create", "--userns", "host", "--rootfs", root))
		h.Saw(id)
		h.Must(t, "exec", id, "--", "sh", "-c", script)
		return id
	}
	id := create("rm -f /etc/hostname /etc/hosts && mkfifo /etc/hostname && ln -s " + hostFile + " /etc/hosts")
	h.Must(t, "checkpoint", id, "files")
	h.Must(t, "rm", "-f", id)
	restored := strings.TrimSpace(h.Must(t, "restore", "files"))
	h.Saw(restored)
	out := h.Must(t, "exec", restored, "--", "sh", "-c", "test -f /etc/hostname && test ! -L /etc/hosts && cat /etc/hosts")
	if !strings.Contains(out, "localhost") {
		t.Errorf("restored /etc/hosts: %q", out)
	}
	id = create("mv /etc /etc.old && ln -s " + hostDir + " /etc")
	h.Must(t, "checkpoint", id, "dir")
	h.Must(t, "rm", "-f", id)
	if r := h.Sbx(t, "", "restore", "dir"); r.Code == 0 || !strings.Contains(r.Stderr, "/etc in the writable layer is not a directory") {
		t.Errorf("restore of a sandbox whose /etc is a symlink to a host directory: exit %d, %s", r.Code, r.Stderr)
	}
	entries, _ := os.ReadDir(hostDir)
	if got, _ := os.ReadFile(hostFile); len(entries) != 1 || string(got) != "host's\n" {
		t.Errorf("a restore wrote to the host directory: %d entries, hosts %q", len(entries), got)
	}
}

// A sandbox that replaced its working directory (one the image lacks,
// made at its create) with a symlink is restored as it left it: the
// restore neither fails nor makes the directory again over the symlink.
func TestSnapshotRestoreWorkdirReplacedByASymlink(t *testing.T) {
	h := harness.NewHost(t)
	root := fixture.NewBusyboxRootfs(t, filepath.Join(t.TempDir(), "root"))
	id := strings.TrimSpace(h.Must(t, "create", "--userns", "host", "--rootfs", root, "-w", "/work"))
	h.Saw(id)
	h.Must(t, "exec", "-w", "/", id, "--", "sh", "-c", "rmdir /work && ln -s /tmp /work")
	h.Must(t, "checkpoint", id, "workdir")
	h.Must(t, "rm", "-f", id)
	restored := strings.TrimSpace(h.Must(t, "restore", "workdir"))
	h.Saw(restored)
	if out := h.Must(t, "exec", "-w", "/", restored, "--", "readlink", "/work"); out != "/tmp\n" {
		t.Errorf("restored /work: %q, want the sandbox's symlink to /tmp", out)
	}
}

// A restored sandbox passes the escape checks of a created one: seccomp,
// capabilities, no_new_privs, namespaces, read-only cgroup limits.
func TestSnapshotRestoredIsolation(t *testing.T) {
	root := harness.AdversaryRoot(t)
	var script []string
	want := map[string]string{}
	for _, c := range harness.EscapeChecks {
		script = append(script, "/adversary "+c.Args)
		name := c.Args
		if f := strings.Fields(c.Args); f[0] == "ptrace" || f[0] == "mknod" {
			name = f[0]
		}
		want[name] = c.Want
	}
	sh := strings.Join(script, "; ")
	h := harness.NewHost(t)
	src := strings.TrimSpace(h.Must(t, "create", "--userns", "host", "--rootfs", root, "--memory", "256m"))
	h.Saw(src)
	h.Must(t, "checkpoint", "--leave-running", src, "iso")
	id := strings.TrimSpace(h.Must(t, "restore", "iso"))
	h.Saw(id)
	harness.ExpectAdversary(t, "restored sandbox", h.Must(t, "exec", id, "--", "sh", "-c", sh), want)
	status := func(ref string) map[string]string {
		return harness.StatusLines(h.Must(t, "exec", ref, "cat", "/proc/1/status"))
	}
	a, b := status(src), status(id)
	for _, k := range harness.ConfinementLines {
		if a[k] == "" || a[k] != b[k] {
			t.Errorf("PID 1's %s: created %q, restored %q", k, a[k], b[k])
		}
	}
	if b["NoNewPrivs:"] != "1" || b["Seccomp:"] != "2" {
		t.Errorf("restored PID 1: %v", b)
	}
	sb := h.Inspect(t, id)
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		theirs, err := os.Readlink("/proc/" + strconv.Itoa(sb.Pid) + "/ns/" + ns)
		if err != nil || theirs == mine {
			t.Errorf("restored sandbox's %s namespace %q is the host's (%q): %v", ns, theirs, mine, err)
		}
	}
	if out, err := exec.Command("cat", "/proc/"+strconv.Itoa(sb.Pid)+"/cgroup").Output(); err != nil || !strings.Contains(string(out), id) {
		t.Errorf("restored PID 1 is not in the sandbox's cgroup: %s %v", out, err)
	}
}

// Checkpoint, restore, fork, export and import, and stop --checkpoint work
// the same through sbx serve (server/client implements sbx.Snapshots).
func TestSnapshotOverREST(t *testing.T) {
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := harness.Context(t)
	c := e.C
	sb, err := c.Create(ctx, sbx.Options{Rootfs: fixture.BusyboxRootfs(t), UserNS: sbx.UserNSHost})
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	run := func(id, cmd string) string {
		t.Helper()
		res, err := c.Exec(ctx, id, sbx.ExecRequest{Argv: []string{"sh", "-c", cmd}}, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec %q in %s: %v %+v", cmd, id, err, res)
		}
		return res.Stdout
	}
	run(sb.ID, "echo rest > /root/f")
	snap, err := c.Checkpoint(ctx, sb.ID, sbx.CheckpointOptions{Snapshot: "r1", LeaveRunning: true})
	if err != nil || snap.Name != "r1" || len(snap.Files) == 0 {
		t.Fatalf("checkpoint: %v %+v", err, snap)
	}
	if list, err := c.ListSnapshots(ctx); err != nil || len(list) != 1 || list[0].Name != "r1" {
		t.Fatalf("list: %v %v", err, list)
	}
	restored, err := c.Restore(ctx, "r1", sbx.RestoreOptions{Name: "rest-copy"})
	if err != nil {
		t.Fatal(err)
	}
	e.See(restored.ID)
	if out := run(restored.ID, "cat /root/f"); out != "rest\n" {
		t.Fatalf("restored file: %q", out)
	}
	copies, err := c.Fork(ctx, sb.ID, sbx.ForkOptions{Count: 2})
	if err != nil || len(copies) != 2 {
		t.Fatalf("fork: %v %v", err, copies)
	}
	for _, cp := range copies {
		e.See(cp.ID)
		if out := run(cp.ID, "cat /root/f"); out != "rest\n" {
			t.Fatalf("fork copy's file: %q", out)
		}
	}
	var buf bytes.Buffer
	if err := c.ExportSnapshot(ctx, "r1", &buf); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveSnapshot(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InspectSnapshot(ctx, "r1"); err == nil {
		t.Fatal("a removed snapshot is still there")
	}
	if imp, err := c.ImportSnapshot(ctx, &buf, "r2"); err != nil || imp.Name != "r2" {
		t.Fatalf("import: %v %+v", err, imp)
	}
	if _, err := c.InspectSnapshot(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Stop(ctx, sb.ID, sbx.StopOptions{Checkpoint: true}); err != nil || got.Status != sbx.StatusStopped || got.Checkpoint == "" {
		t.Fatalf("stop --checkpoint: %v %+v", err, got)
	}
	if _, err := c.Start(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if out := run(sb.ID, "cat /root/f"); out != "rest\n" {
		t.Fatalf("resumed file: %q", out)
	}
	if err := c.RemoveSnapshot(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	for _, id := range append([]string{sb.ID, restored.ID}, copies[0].ID, copies[1].ID) {
		if err := c.Remove(ctx, id, sbx.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
}
