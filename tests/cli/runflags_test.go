package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDockerRunFlags: docker run's flags as docker users type them, in a
// one-shot run and in a long-lived sandbox: -h sets the hostname (help is
// --help), --add-host, --ulimit, --shm-size, --mount of a bind and a
// tmpfs; bad values are refused before anything is made.
func TestDockerRunFlags(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in"), []byte("bound\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `hostname; grep -w db /etc/hosts; ulimit -n; ulimit -Hn; grep ' /dev/shm ' /proc/mounts | grep -o 'size=[0-9]*k'; ` +
		`cat /data/in; touch /data/x 2>/dev/null || echo read-only; grep ' /t tmpfs ' /proc/mounts | grep -o 'size=[0-9]*k'`
	want := "box1\n10.1.2.3\tdb\n512\n1024\nsize=8192k\nbound\nread-only\nsize=1024k\n"
	// --ulimit in a private user namespace (the default) needs
	// CAP_SYS_RESOURCE, which the development hosts lack: the shared
	// flags run in the host's, and the private case is checked below.
	flags := []string{"--userns", "host", "-h", "box1", "--add-host", "db:10.1.2.3", "--ulimit", "nofile=512:1024", "--shm-size", "8m",
		"--mount", "type=bind,source=" + dir + ",target=/data,readonly", "--mount", "type=tmpfs,target=/t,tmpfs-size=1m"}
	if out := h.Must(t, append(append([]string{"run"}, flags...), "busybox", "sh", "-c", script)...); out != want {
		t.Fatalf("one-shot run with docker's flags printed %q, want %q", out, want)
	}
	id := create(t, h, append(flags, "busybox")...)
	if out := h.Must(t, "exec", id, "--", "sh", "-c", script); out != want {
		t.Fatalf("exec in a sandbox created with docker's flags printed %q, want %q", out, want)
	}
	if sb := h.Inspect(t, id); sb.Options.ShmSizeBytes != 8<<20 || len(sb.Options.Ulimits) != 1 || sb.Options.Ulimits[0].Soft != 512 ||
		len(sb.Options.ExtraHosts) != 1 || sb.Options.Hostname != "box1" {
		t.Fatalf("the record: %+v", sb.Options)
	}
	h.Must(t, "rm", "-f", id)

	// --mount type=volume: a named volume, kept across sandboxes.
	h.Must(t, "run", "--mount", "type=volume,source=data1,target=/d", "busybox", "sh", "-c", "echo kept > /d/f")
	if out := h.Must(t, "run", "--mount", "source=data1,target=/d,readonly", "busybox", "sh", "-c", "cat /d/f; touch /d/g 2>/dev/null || echo ro"); out != "kept\nro\n" {
		t.Fatalf("a named volume through --mount: %q", out)
	}
	h.Must(t, "volume", "rm", "data1")
	private := h.Sbx(t, "", "run", "--ulimit", "nofile=512:1024", "busybox", "sh", "-c", "ulimit -n")
	if hasCapSysResource(t) {
		if private.Code != 0 || private.Stdout != "512\n" {
			t.Errorf("--ulimit in a private user namespace, with CAP_SYS_RESOURCE: %d %q %q", private.Code, private.Stdout, private.Stderr)
		}
	} else if private.Code != 125 || !strings.Contains(private.Stderr, "CAP_SYS_RESOURCE") || !strings.Contains(private.Stderr, "--userns host") {
		t.Errorf("--ulimit in a private user namespace, without CAP_SYS_RESOURCE: %d %q, want a refusal saying to add --userns host", private.Code, private.Stderr)
	}
	if r := h.Sbx(t, "", "run", "--help"); r.Code != 0 || !strings.Contains(r.Stdout, "-h, --hostname") {
		t.Fatalf("run --help: %d %q", r.Code, r.Stdout)
	}
	for _, bad := range [][]string{
		{"--ulimit", "nofiles=1"}, {"--ulimit", "nofile=9:8"}, {"--add-host", "db"}, {"--add-host", "db:host-gateway"},
		{"--shm-size", "1"}, {"--mount", "type=volume,source=v,target=/v"}, {"--mount", "type=bind,target=/v"},
		{"--mount", "type=tmpfs,target=/t,bind-propagation=shared"}, {"-P"},
	} {
		if r := h.Sbx(t, "", append(append([]string{"run"}, bad...), "busybox", "true")...); r.Code != 125 || r.Stderr == "" {
			t.Errorf("run %v: %d %q, want a refusal", bad, r.Code, r.Stderr)
		}
	}
	harness.AssertNoLeftovers(t)
}

// TestDockerRunPublish: -P publishes every port the image exposes on a
// free host port, -p CTRPORT one port on a free host port, and a -p of an
// exposed port takes the place of -P's.
func TestDockerRunPublish(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")
	ctx := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM busybox\nEXPOSE 8080 9000/udp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Must(t, "build", "-q", "-t", "exposed:1", ctx)

	id := create(t, h, "--network", "bridge", "-P", "--name", "pub", "exposed:1")
	out := h.Must(t, "port", id)
	if !regexp.MustCompile(`^8080/tcp -> 0\.0\.0\.0:[1-9][0-9]*\n9000/udp -> 0\.0\.0\.0:[1-9][0-9]*\n$`).MatchString(out) {
		t.Fatalf("port of a -P sandbox: %q", out)
	}
	// docker's field names in templates.
	out = h.Must(t, "inspect", "-f", "{{.State.Status}} {{.State.Running}} {{.Image}} {{.Ports}}", id)
	if !regexp.MustCompile(`^running true exposed:1 0\.0\.0\.0:[0-9]+->8080/tcp, 0\.0\.0\.0:[0-9]+->9000/udp\n$`).MatchString(out) {
		t.Fatalf("inspect -f with docker's names: %q", out)
	}
	if out := h.Must(t, "ps", "--format", "{{.ID}} {{.Names}} {{.State}}"); out != id+" pub running\n" {
		t.Fatalf("ps --format with docker's names: %q", out)
	}
	h.Must(t, "rm", "-f", id)

	id = create(t, h, "--network", "bridge", "-P", "-p", "127.0.0.1::8080", "-p", "81", "exposed:1")
	out = h.Must(t, "port", id)
	for _, re := range []string{`(?m)^8080/tcp -> 127\.0\.0\.1:[1-9][0-9]*$`, `(?m)^9000/udp -> 0\.0\.0\.0:[1-9][0-9]*$`, `(?m)^81/tcp -> 0\.0\.0\.0:[1-9][0-9]*$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("port of -P with -p 127.0.0.1::8080 and -p 81: %q lacks %s", out, re)
		}
	}
	if strings.Count(out, "8080/tcp") != 1 {
		t.Errorf("8080 published twice: %q", out)
	}
	h.Must(t, "rm", "-f", id)
	harness.AssertNoLeftovers(t)
}

// TestDockerRunNamedForeground: run --name without -d is a sandbox others
// see while it runs (ps, exec by its name), whose output is followed and
// whose exit code is sbx's; it is removed at its end.
func TestDockerRunNamedForeground(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	h.ImportBusybox(t, "busybox")
	cmd := h.Command("run", "--name", "fg", "-l", "k=v", "busybox", "sh", "-c", "echo out; echo err >&2; until [ -e /go ]; do sleep 0.05; done; exit 3")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr, cmd.Env = &stdout, &stderr, append(os.Environ(), h.Env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := false
	for range 200 { // 10 s
		if r := h.Sbx(t, "", "inspect", "-f", "{{.Status}}", "fg"); r.Stdout == "running\n" {
			seen = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !seen {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("run --name fg is not listed while it runs; stderr %q", stderr.String())
	}
	h.Must(t, "exec", "fg", "--", "touch", "/go")
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 3 || stdout.String() != "out\n" || stderr.String() != "err\n" {
		t.Fatalf("run --name fg: exit %d (%v), stdout %q, stderr %q", code, err, stdout.String(), stderr.String())
	}
	if out := h.Must(t, "ps", "-a", "-q"); out != "" {
		t.Fatalf("the sandbox of run --name outlived its command: %q", out)
	}
	if r := h.Sbx(t, "", "run", "--name", "fg2", "-t", "busybox", "true"); r.Code != 125 || !strings.Contains(r.Stderr, "--tty does not go with --name") {
		t.Fatalf("run --name -t: %d %q", r.Code, r.Stderr)
	}
	harness.AssertNoLeftovers(t)
}

// create runs sbx create with args (an image among them) and returns the
// sandbox's id, recorded for the leak check.
func create(t *testing.T, h *harness.Host, args ...string) string {
	t.Helper()
	id := strings.TrimSpace(h.Must(t, append([]string{"create"}, args...)...))
	h.Saw(id)
	return id
}

// hasCapSysResource reports whether this process (root, as sbx runs) has
// CAP_SYS_RESOURCE in its effective set.
func hasCapSysResource(t *testing.T) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps&(1<<24) != 0 // CAP_SYS_RESOURCE
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}
