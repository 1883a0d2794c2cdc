package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerFirstTenCommands runs a docker user's first ten commands in
// the order they reach for them (run, run -d, ps, logs -f, exec -it, cp,
// stop, rm, images, rmi) and checks each does what docker's does, and then
// what they reach for next: build, a main command that exited in ps,
// --restart on-failure, a named volume. The image comes from an archive:
// this machine reaches no image registry.
func TestDockerFirstTenCommands(t *testing.T) {
	h := harness.NewHost(t)
	h.ImportBusybox(t, "busybox")

	// 1. run: the image's command, output, exit code, nothing left.
	if out := h.Must(t, "run", "busybox", "echo", "hello"); out != "hello\n" {
		t.Fatalf("run: %q", out)
	}
	if r := h.Sbx(t, "", "run", "busybox", "sh", "-c", "exit 7"); r.Code != 7 {
		t.Fatalf("run's exit code: %d, want 7", r.Code)
	}

	// 2. run -d: the ID, the command running on.
	id := strings.TrimSpace(h.Must(t, "run", "-d", "--name", "web", "busybox", "sh", "-c",
		"echo started; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"))
	h.Saw(id)
	if len(id) != 32 {
		t.Fatalf("run -d printed %q, want an ID", id)
	}

	// 3. ps: listed, running, with its command.
	if out := h.Must(t, "ps"); !strings.Contains(out, id[:12]) || !strings.Contains(out, "web") || !strings.Contains(out, "Up ") || !strings.Contains(out, "sh -c") {
		t.Fatalf("ps:\n%s", out)
	}

	// 4. logs -f: what was written and what comes, until interrupted.
	logs := h.Command("logs", "-f", "web")
	stdout, err := logs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	got := map[string]bool{}
	deadline := time.AfterFunc(60*time.Second, func() { _ = logs.Process.Kill() })
	for sc.Scan() && !(got["started"] && got["tick 5"]) {
		got[sc.Text()] = true
	}
	deadline.Stop()
	if !got["started"] || !got["tick 5"] {
		_ = logs.Process.Kill()
		_ = logs.Wait()
		t.Fatalf("logs -f showed %v; want the first line and later ones", got)
	}
	_ = logs.Process.Signal(syscall.SIGINT) // Ctrl-C
	if err := logs.Wait(); err != nil {
		t.Fatalf("logs -f after Ctrl-C: %v", err)
	}

	// 5. exec -it: a terminal, input, the exit code.
	r := h.Sbx(t, "tty; echo in-the-sandbox; exit 3\n", "exec", "-it", "web", "sh")
	if r.Code != 3 || !strings.Contains(r.Stdout, "/dev/pts/") || !strings.Contains(r.Stdout, "in-the-sandbox") {
		t.Fatalf("exec -it: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}

	// 6. cp: in and out.
	dir := t.TempDir()
	site := filepath.Join(dir, "site")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte("<h1>hi</h1>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "cp", site, "web:/www")
	if out := h.Must(t, "exec", "web", "cat", "/www/index.html"); out != "<h1>hi</h1>\n" {
		t.Fatalf("after cp in: %q", out)
	}
	h.Must(t, "cp", "web:/etc/hostname", dir)
	if data, err := os.ReadFile(filepath.Join(dir, "hostname")); err != nil || strings.TrimSpace(string(data)) != id[:12] {
		t.Fatalf("cp out: %q %v", data, err)
	}

	// 7. stop: stopped, and its output still there.
	h.Must(t, "stop", "-t", "2", "web")
	if sb := h.Inspect(t, "web"); sb.Status != "stopped" {
		t.Fatalf("after stop: %s", sb.Status)
	}
	if out := h.Must(t, "logs", "--tail", "1", "web"); !strings.HasPrefix(out, "tick ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("logs --tail 1 after stop: %q", out)
	}

	// 8. rm: gone, and nothing of it left.
	h.Must(t, "rm", "web")
	if r := h.Sbx(t, "", "inspect", "web"); r.Code != 1 {
		t.Fatalf("inspect after rm: %d %s", r.Code, r.Stderr)
	}
	h.AssertNoLeaksOf(t, id)

	// And build: an image of theirs from a Dockerfile, built again with
	// every step cached.
	ctx := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM busybox\nCOPY site/ /www/\nCMD [\"cat\", \"/www/index.html\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(ctx, "site"), os.DirFS(site)); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "build", "-t", "site:1", ctx)
	if r := h.Sbx(t, "", "build", "-t", "site:1", ctx); r.Code != 0 || !strings.Contains(r.Stderr, "CACHED") || !strings.Contains(r.Stderr, "(3 steps, 1 cached)") {
		t.Fatalf("second build: %d\n%s", r.Code, r.Stderr)
	}
	if out := h.Must(t, "run", "--rm", "site:1"); out != "<h1>hi</h1>\n" {
		t.Fatalf("run of the built image: %q", out)
	}
	h.Must(t, "rmi", "site:1")

	// An exited main command, --restart, a named volume.
	five := strings.TrimSpace(h.Must(t, "run", "-d", "--name", "five", "busybox", "sh", "-c", "exit 5"))
	h.Saw(five)
	harness.WaitUntil(t, time.Minute, "ps -a shows the command exited", func() bool {
		return strings.Contains(h.Must(t, "ps", "-a", "--filter", "name=five"), "Exited (5) ")
	})
	if out := h.Must(t, "ps", "-q"); strings.Contains(out, five[:12]) {
		t.Fatalf("ps without -a lists a sandbox whose command exited:\n%s", out)
	}
	if out := h.Must(t, "ps", "-aq", "--filter", "status=exited"); !strings.Contains(out, five[:12]) {
		t.Fatalf("ps -a --filter status=exited:\n%s", out)
	}
	h.Must(t, "rm", "five") // exited: no -f needed, as in docker
	flaky := strings.TrimSpace(h.Must(t, "run", "-d", "--restart", "on-failure:2", "busybox", "sh", "-c", "echo try; exit 1"))
	h.Saw(flaky)
	harness.WaitUntil(t, time.Minute, "on-failure:2 gave up", func() bool { return h.Inspect(t, flaky).State() == "exited" })
	if sb := h.Inspect(t, flaky); sb.RestartCount != 2 || h.Must(t, "logs", flaky) != "try\ntry\ntry\n" {
		t.Fatalf("--restart on-failure:2: %d restarts, logs %q", sb.RestartCount, h.Must(t, "logs", flaky))
	}
	h.Must(t, "rm", flaky)
	h.Must(t, "volume", "create", "notes")
	w := strings.TrimSpace(h.Must(t, "run", "-d", "-v", "notes:/notes", "busybox", "sh", "-c", "echo kept > /notes/n"))
	h.Saw(w)
	h.Must(t, "wait", w)
	h.Must(t, "rm", w)
	if out := h.Must(t, "run", "--rm", "-v", "notes:/notes", "busybox", "cat", "/notes/n"); out != "kept\n" {
		t.Fatalf("a named volume after its first sandbox went: %q", out)
	}
	h.Must(t, "volume", "rm", "notes")

	// 9. images, 10. rmi.
	if out := h.Must(t, "images"); !strings.Contains(out, "busybox:latest") {
		t.Fatalf("images:\n%s", out)
	}
	h.Must(t, "rmi", "busybox")
	if out := h.Must(t, "images"); strings.Contains(out, "busybox") {
		t.Fatalf("images after rmi:\n%s", out)
	}
}
