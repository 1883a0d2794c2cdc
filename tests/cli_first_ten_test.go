package tests

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDockerFirstTenCommands runs a docker user's first ten commands in
// the order they reach for them (run, run -d, ps, logs -f, exec -it, cp,
// stop, rm, images, rmi) and checks each does what docker's does. The
// image comes from an archive: this machine reaches no image registry.
func TestDockerFirstTenCommands(t *testing.T) {
	h := newLCHost(t)
	h.importBusybox(t, "busybox")

	// 1. run: the image's command, output, exit code, nothing left.
	if out := h.must(t, "run", "busybox", "echo", "hello"); out != "hello\n" {
		t.Fatalf("run: %q", out)
	}
	if r := h.sbx(t, "", "run", "busybox", "sh", "-c", "exit 7"); r.code != 7 {
		t.Fatalf("run's exit code: %d, want 7", r.code)
	}

	// 2. run -d: the ID, the command running on.
	id := strings.TrimSpace(h.must(t, "run", "-d", "--name", "web", "busybox", "sh", "-c",
		"echo started; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"))
	h.saw(id)
	if len(id) != 32 {
		t.Fatalf("run -d printed %q, want an ID", id)
	}

	// 3. ps: listed, running, with its command.
	if out := h.must(t, "ps"); !strings.Contains(out, id[:12]) || !strings.Contains(out, "web") || !strings.Contains(out, "running") || !strings.Contains(out, "sh -c") {
		t.Fatalf("ps:\n%s", out)
	}

	// 4. logs -f: what was written and what comes, until interrupted.
	logs := h.command("logs", "-f", "web")
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
	r := h.sbx(t, "tty; echo in-the-sandbox; exit 3\n", "exec", "-it", "web", "sh")
	if r.code != 3 || !strings.Contains(r.stdout, "/dev/pts/") || !strings.Contains(r.stdout, "in-the-sandbox") {
		t.Fatalf("exec -it: %d %q %q", r.code, r.stdout, r.stderr)
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
	h.must(t, "cp", site, "web:/www")
	if out := h.must(t, "exec", "web", "cat", "/www/index.html"); out != "<h1>hi</h1>\n" {
		t.Fatalf("after cp in: %q", out)
	}
	h.must(t, "cp", "web:/etc/hostname", dir)
	if data, err := os.ReadFile(filepath.Join(dir, "hostname")); err != nil || strings.TrimSpace(string(data)) != id[:12] {
		t.Fatalf("cp out: %q %v", data, err)
	}

	// 7. stop: stopped, and its output still there.
	h.must(t, "stop", "-t", "2", "web")
	if sb := h.inspect(t, "web"); sb.Status != "stopped" {
		t.Fatalf("after stop: %s", sb.Status)
	}
	if out := h.must(t, "logs", "--tail", "1", "web"); !strings.HasPrefix(out, "tick ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("logs --tail 1 after stop: %q", out)
	}

	// 8. rm: gone, and nothing of it left.
	h.must(t, "rm", "web")
	if r := h.sbx(t, "", "inspect", "web"); r.code != 1 {
		t.Fatalf("inspect after rm: %d %s", r.code, r.stderr)
	}
	h.assertNoLeaksOf(t, id)

	// 9. images, 10. rmi.
	if out := h.must(t, "images"); !strings.Contains(out, "busybox:latest") {
		t.Fatalf("images:\n%s", out)
	}
	h.must(t, "rmi", "busybox")
	if out := h.must(t, "images"); strings.Contains(out, "busybox") {
		t.Fatalf("images after rmi:\n%s", out)
	}
}
