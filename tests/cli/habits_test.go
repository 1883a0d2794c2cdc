package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerHabitsRun: a docker user's run: the first argument is an image
// (a bare name included), "--" is host mode, a name that is neither gets
// an error that says how to run a host command; -v, --tmpfs and --rm work
// as docker's; --ttl without -d is refused with what to write instead
// (--name without -d works: runflags_test.go).
func TestDockerHabitsRun(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")
	if out := h.Must(t, "run", "--rm", "busybox", "echo", "from", "the", "image"); out != "from the image\n" {
		t.Fatalf("sbx run busybox printed %q", out)
	}
	if out := h.Must(t, "run", "--", "sh", "-c", "test -d /workspace && echo host mode"); out != "host mode\n" {
		t.Fatalf("sbx run -- printed %q", out)
	}
	r := h.Sbx(t, "", "run", "--pull", "never", "nosuchthing", "-la")
	if r.Code != 125 || !strings.Contains(r.Stderr, "sbx run -- nosuchthing") {
		t.Fatalf("run of a name that is no image: %d %q", r.Code, r.Stderr)
	}
	// SBX_PULL=never is the default of --pull for run, run -d and
	// create IMAGE CMD alike: a missing image is not pulled (the
	// address answers nothing, so a pull would say "unreachable").
	for _, args := range [][]string{{"run"}, {"run", "-d"}, {"create"}} {
		args = append(args, "127.0.0.1:1/nosuch:1", "true")
		if r := h.Sbx(t, "", args...); r.Code != 125 || !strings.Contains(r.Stderr, "is not in the cache") ||
			strings.Count(r.Stderr, "cache") != 1 || strings.Contains(r.Stderr, "unreachable") {
			t.Fatalf("sbx %v with SBX_PULL=never: %d %q", args, r.Code, r.Stderr)
		}
	}
	if r := h.Sbx(t, "", "run", "./script.sh"); r.Code != 125 || !strings.Contains(r.Stderr, "sbx run -- ./script.sh") {
		t.Fatalf("run of a path: %d %q", r.Code, r.Stderr)
	}
	if r := h.Sbx(t, "", "run", "--ttl", "1h", "busybox", "true"); r.Code != 125 || !strings.Contains(r.Stderr, "-d") {
		t.Fatalf("run --ttl without -d: %d %q", r.Code, r.Stderr)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The sandbox's root is its own host range: the volume lets any user
	// write, as /tmp does.
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	out := h.Must(t, "run", "-v", dir+":/data", "--tmpfs", "/scratch:size=1m", "busybox", "sh", "-c",
		"cat /data/in; echo back > /data/out; grep -c ' /scratch tmpfs ' /proc/mounts")
	if out != "from the host\n1\n" {
		t.Fatalf("run with -v and --tmpfs printed %q", out)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(data) != "back\n" {
		t.Fatalf("the volume's write: %q %v", data, err)
	}
	harness.AssertNoLeftovers(t)
}

// TestDockerHabitsSandboxVerbs: create IMAGE CMD records the image's
// command line, stop -t takes seconds, kill stops a sandbox without a main
// command, restart runs it again, unpause is resume, port lists the
// published ports.
func TestDockerHabitsSandboxVerbs(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")

	id := strings.TrimSpace(h.Must(t, "create", "--name", "with-cmd", "busybox", "sleep", "9101"))
	h.Saw(id)
	if sb := h.Inspect(t, "with-cmd"); strings.Join(sb.Options.Cmd, " ") != "sleep 9101" {
		t.Fatalf("create IMAGE CMD recorded the command %q", sb.Options.Cmd)
	}
	if r := h.Sbx(t, "", "stop", "-t", "1", "with-cmd"); r.Code != 0 {
		t.Fatalf("stop -t 1: %d %s", r.Code, r.Stderr)
	}
	if sb := h.Inspect(t, id); sb.Status != "stopped" {
		t.Fatalf("after stop -t 1: %s", sb.Status)
	}

	plain := h.Create(t, "--network", "bridge", "-p", "127.0.0.1:0:80")
	h.Must(t, "pause", plain)
	h.Must(t, "unpause", plain)
	if sb := h.Inspect(t, plain); sb.Status != "running" {
		t.Fatalf("after unpause: %s", sb.Status)
	}
	if out := h.Must(t, "port", plain); !regexp.MustCompile(`^80/tcp -> 127\.0\.0\.1:[1-9][0-9]*\n$`).MatchString(out) {
		t.Fatalf("port: %q", out)
	}
	if out := h.Must(t, "port", plain, "80"); !regexp.MustCompile(`^127\.0\.0\.1:[1-9][0-9]*\n$`).MatchString(out) {
		t.Fatalf("port 80: %q", out)
	}
	if r := h.Sbx(t, "", "port", plain, "81/udp"); r.Code == 0 {
		t.Fatalf("port of an unpublished port: %q", r.Stdout)
	}
	h.Must(t, "kill", plain)
	if sb := h.Inspect(t, plain); sb.Status != "stopped" {
		t.Fatalf("after kill: %s", sb.Status)
	}
	if r := h.Sbx(t, "", "kill", "-s", "NOSUCH", plain); r.Code != 125 || !strings.Contains(r.Stderr, "invalid signal") {
		t.Fatalf("kill -s NOSUCH: %d %q", r.Code, r.Stderr)
	}
	// ps and inspect as docker's: templates, -n/-l, --no-trunc.
	if out := h.Must(t, "ps", "-a", "--format", "{{.Name}} {{.Status}} {{json .Options.Cmd}}", "--filter", "name=with-cmd"); out != `with-cmd stopped ["sleep","9101"]`+"\n" {
		t.Fatalf("ps --format: %q", out)
	}
	if out := h.Must(t, "ps", "-l", "-q", "--no-trunc"); out != plain+"\n" {
		t.Fatalf("ps -l -q --no-trunc: %q, want %s", out, plain)
	}
	if out := h.Must(t, "ps", "-n", "2", "-q"); out != id+"\n"+plain+"\n" {
		t.Fatalf("ps -n 2 -q: %q", out)
	}
	if out := h.Must(t, "inspect", "-f", "{{.Status}} {{.Network.Mode}}", plain); out != "stopped bridge\n" {
		t.Fatalf("inspect -f: %q", out)
	}
	if r := h.Sbx(t, "", "inspect", "-f", "{{.NoSuchField}}", plain); r.Code != 125 || !strings.Contains(r.Stderr, "NoSuchField") {
		t.Fatalf("inspect -f with a bad field: %d %q", r.Code, r.Stderr)
	}
	// Shell completion offers sandbox names and IDs, and image names.
	if out := h.Must(t, "__complete", "rm", "with"); !strings.HasPrefix(out, "with-cmd\n") {
		t.Fatalf("completion of rm with: %q", out)
	}
	if out := h.Must(t, "__complete", "stop", ""); !strings.Contains(out, plain[:12]+"\n") || !strings.Contains(out, id[:12]+"\n") {
		t.Fatalf("completion of stop: %q", out)
	}
	if out := h.Must(t, "__complete", "rmi", "busy"); !strings.HasPrefix(out, "busybox:latest\n") {
		t.Fatalf("completion of rmi busy: %q", out)
	}
	h.Must(t, "restart", "-t", "1", plain)
	if out := h.Must(t, "exec", plain, "echo", "back"); out != "back\n" {
		t.Fatalf("exec after restart: %q", out)
	}
}

// TestDockerHabitsNotRoot: an unprivileged user is told that sbx needs root
// and what to do instead, not "permission denied" on some directory.
func TestDockerHabitsNotRoot(t *testing.T) {
	dir, err := os.MkdirTemp("", "sbx-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sbx")
	data, err := os.ReadFile(harness.SbxBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--root", filepath.Join(dir, "root"), "--run-root", filepath.Join(dir, "run"), "run", "busybox", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	r := harness.RunCmd(t, cmd, "")
	if r.Code != 125 || !strings.Contains(r.Stderr, "sbx needs root") || !strings.Contains(r.Stderr, "--host") {
		t.Fatalf("sbx run as nobody: %d %q", r.Code, r.Stderr)
	}
}

// TestDockerHabitsEvents: sbx events without a server sees what other sbx
// processes do on this host, as it happens.
func TestDockerHabitsEvents(t *testing.T) {
	h := harness.NewHost(t)
	cmd := h.Command("events")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The watcher starts with the command, at a time the test cannot see,
	// and it polls the state: a sandbox made before it starts is not new
	// to it. So each attempt makes a sandbox, waits for its creation to
	// show, and only then removes it and waits for that.
	seen := map[string]bool{}
	waitFor := func(event string) bool {
		timeout := time.After(20 * time.Second)
		for !seen[event] {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("sbx events ended")
				}
				if f := strings.Fields(l); len(f) >= 3 {
					seen[f[1]+" "+f[2]] = true
				}
			case <-timeout:
				return false
			}
		}
		return true
	}
	for attempt := 1; attempt <= 3; attempt++ {
		id := h.Create(t)
		created := waitFor("sandbox.created " + id)
		h.Must(t, "rm", "-f", id)
		if !created {
			continue
		}
		if !waitFor("sandbox.removed " + id) {
			t.Fatalf("sbx events reported the creation of %s but not its removal: %v", id, seen)
		}
		return
	}
	t.Fatalf("3 sandboxes made, and sbx events reported the creation of none: %v", seen)
}

// TestDockerHabitsSystem: system df counts images, layers and sandboxes;
// system prune needs -f when it cannot ask, removes exited sandboxes
// (stopped, or whose main command ended, as ps shows them) and keeps
// running ones and their images; -a removes the unused images.
func TestDockerHabitsSystem(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")
	// An image of its own layer that no sandbox uses.
	extra := t.TempDir()
	if err := os.WriteFile(filepath.Join(extra, "data"), make([]byte, 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(t.TempDir(), "unused.tar")
	if out, err := exec.Command("tar", "-C", extra, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	h.Must(t, "import", "-q", tarball, "unused")
	h.Must(t, "tag", "busybox", "other:1")
	running := strings.TrimSpace(h.Must(t, "create", "busybox"))
	h.Saw(running)
	stopped := strings.TrimSpace(h.Must(t, "create", "busybox"))
	h.Saw(stopped)
	h.Must(t, "exec", stopped, "sh", "-c", "head -c 3000000 /dev/zero > /big")
	h.Must(t, "stop", "-t", "1", stopped)
	// Its main command ended: ps shows it Exited though its PID 1 runs.
	exited := strings.TrimSpace(h.Must(t, "create", "busybox", "sh", "-c", "exit 3"))
	h.Saw(exited)
	for i := 0; strings.TrimSpace(h.Must(t, "inspect", "-f", "{{.State.Status}}", exited)) != "exited"; i++ {
		if i == 200 {
			t.Fatalf("the main command of %s did not show as exited within 10 s", exited)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var du struct {
		Images, ImagesInUse, Sandboxes, SandboxesRunning           int
		LayersBytes, ReclaimableBytes, WritableBytes, StoppedBytes int64
	}
	var raw map[string]int64
	if err := json.Unmarshal([]byte(h.Must(t, "system", "df", "--format", "json")), &raw); err != nil {
		t.Fatal(err)
	}
	du.Images, du.ImagesInUse, du.Sandboxes, du.SandboxesRunning = int(raw["images"]), int(raw["images_in_use"]), int(raw["sandboxes"]), int(raw["sandboxes_running"])
	du.LayersBytes, du.ReclaimableBytes, du.WritableBytes, du.StoppedBytes = raw["layers_bytes"], raw["reclaimable_bytes"], raw["writable_bytes"], raw["stopped_writable_bytes"]
	// busybox and other:1 share one layer (counted once); unused has a
	// layer of its own, no sandbox's.
	if du.Images != 3 || du.ImagesInUse != 2 || du.Sandboxes != 3 || du.SandboxesRunning != 1 {
		t.Fatalf("system df counts: %+v", du)
	}
	if du.LayersBytes <= 0 || du.ReclaimableBytes < 100000 || du.ReclaimableBytes >= du.LayersBytes || du.StoppedBytes < 3000000 || du.WritableBytes < du.StoppedBytes {
		t.Fatalf("system df sizes: %+v", du)
	}
	if out := h.Must(t, "system", "df"); !strings.HasPrefix(out, "TYPE") {
		t.Fatalf("system df table:\n%s", out)
	}

	if r := h.Sbx(t, "", "system", "prune"); r.Code != 125 || !strings.Contains(r.Stderr, "-f") {
		t.Fatalf("prune without -f and no terminal: %d %q", r.Code, r.Stderr)
	}
	out := h.Must(t, "system", "prune", "-f")
	if !strings.Contains(out, "removed sandbox "+stopped) || !strings.Contains(out, "removed sandbox "+exited) || strings.Contains(out, running) || strings.Contains(out, "removed image") {
		t.Fatalf("prune -f:\n%s", out)
	}
	out = h.Must(t, "system", "prune", "-a", "-f")
	if !strings.Contains(out, "removed image unused:latest") || strings.Contains(out, "busybox") {
		t.Fatalf("prune -a -f:\n%s", out)
	}
	if out := h.Must(t, "images"); !strings.Contains(out, "busybox") || !strings.Contains(out, "other:1") || strings.Contains(out, "unused") {
		t.Fatalf("images after prune -a:\n%s", out)
	}
	if out := h.Must(t, "exec", running, "echo", "alive"); out != "alive\n" {
		t.Fatalf("the running sandbox after prune: %q", out)
	}
}
