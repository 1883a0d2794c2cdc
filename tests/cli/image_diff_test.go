package cli

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// sbxFunc runs sbx with stdin (from a file when not empty) and args
// against one backend: this host's private state, or a server.
type sbxFunc func(t *testing.T, stdinFile string, args ...string) harness.Result

// TestDockerImageAndDiffCommands runs tag, history, save, load, diff and
// rename as a docker user would, on this host and through a server (the
// REST routes and the client): the same commands, the same outcomes.
func TestDockerImageAndDiffCommands(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		h := harness.NewHost(t)
		ref := h.ImportBusybox(t, "dk/app:1")
		run := func(t *testing.T, stdinFile string, args ...string) harness.Result {
			cmd := h.Command(args...)
			cmd.Env = append(os.Environ(), h.Env...)
			return runWithStdin(t, cmd, stdinFile)
		}
		dockerImageFlow(t, run, ref, h.Saw)
	})
	t.Run("remote", func(t *testing.T) {
		p := harness.NewServeDirs(t)
		p.Start(t)
		t.Setenv("SBX_TOKEN", harness.ServerTestToken)
		local := t.TempDir()
		reg := fixture.StartRegistry(t)
		ref := reg.Push(t, "dk/app:1", fixture.BusyboxImage(t))
		run := func(t *testing.T, stdinFile string, args ...string) harness.Result {
			cmd := exec.Command(harness.SbxBin, append([]string{"--root", local + "/root", "--run-root", local + "/run", "--host", "unix://" + p.Sock}, args...)...)
			return runWithStdin(t, cmd, stdinFile)
		}
		var ids []string
		// Also when the flow fails: the server's sandboxes go before it
		// stops, so that nothing outlives the test.
		t.Cleanup(func() {
			if len(ids) > 0 {
				if r := run(t, "", append([]string{"rm", "-f"}, ids...)...); r.Code != 0 {
					t.Errorf("remote rm: %d %s", r.Code, r.Stderr)
				}
			}
			p.Stop(t)
		})
		if r := run(t, "", "pull", "-q", ref); r.Code != 0 {
			t.Fatalf("remote pull: %d %s", r.Code, r.Stderr)
		}
		dockerImageFlow(t, run, ref, func(id string) { ids = append(ids, id) })
	})
}

// tarNames lists the entries of a tar file (names without "./" and "/").
func tarNames(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		names[strings.Trim(strings.TrimPrefix(h.Name, "./"), "/")] = true
	}
}

// runWithStdin runs cmd with the file stdinFile ("": none) as its stdin.
func runWithStdin(t *testing.T, cmd *exec.Cmd, stdinFile string) harness.Result {
	t.Helper()
	if stdinFile != "" {
		f, err := os.Open(stdinFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	return harness.RunCmd(t, cmd, "")
}

// dockerImageFlow runs the commands against the backend of sbxRun, whose
// cache holds the busybox image ref.
func dockerImageFlow(t *testing.T, sbxRun sbxFunc, ref string, saw func(string)) {
	must := func(args ...string) string {
		t.Helper()
		r := sbxRun(t, "", args...)
		if r.Code != 0 {
			t.Fatalf("sbx %s: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}
	// tag: a second name for the same image.
	must("tag", ref, "dk/copy:2")
	var img sbx.Image
	if err := json.Unmarshal([]byte(must("image", "inspect", "dk/copy:2")), &img); err != nil {
		t.Fatal(err)
	}
	var orig sbx.Image
	if err := json.Unmarshal([]byte(must("image", "inspect", ref)), &orig); err != nil {
		t.Fatal(err)
	}
	if img.Digest != orig.Digest || !strings.HasSuffix(img.Name, "dk/copy:2") {
		t.Fatalf("tagged image %s %s, want the digest %s", img.Name, img.Digest, orig.Digest)
	}
	if r := sbxRun(t, "", "tag", "dk/nosuch:1", "dk/x:1"); r.Code == 0 || !strings.Contains(r.Stderr, `image "dk/nosuch:1" is not in the cache`) {
		t.Fatalf("tag of an unknown image: %d %s", r.Code, r.Stderr)
	}

	// history: one step per layer at least, each layer's diffID.
	var steps []sbx.ImageHistoryEntry
	if err := json.Unmarshal([]byte(must("history", "--format", "json", "dk/copy:2")), &steps); err != nil {
		t.Fatal(err)
	}
	var layers []string
	for _, s := range steps {
		if s.DiffID != "" {
			layers = append([]string{s.DiffID}, layers...)
		}
	}
	if strings.Join(layers, ",") != strings.Join(orig.DiffIDs, ",") {
		t.Fatalf("history's layers %v, want the image's %v", layers, orig.DiffIDs)
	}
	if out := must("history", "dk/copy:2"); !strings.HasPrefix(out, "LAYER") || !strings.Contains(out, orig.DiffIDs[0][7:19]) {
		t.Fatalf("history table:\n%s", out)
	}

	// save -o, rmi, load -i and load from stdin: the image comes back
	// under its name and runs.
	dir := t.TempDir()
	archive := filepath.Join(dir, "copy.tar")
	must("save", "-o", archive, "dk/copy:2")
	if st, err := os.Stat(archive); err != nil || st.Size() < 1000 {
		t.Fatalf("save -o wrote %v %v", st, err)
	}
	if r := sbxRun(t, "", "save", "-o", filepath.Join(dir, "none.tar"), "dk/nosuch:1"); r.Code == 0 {
		t.Fatalf("save of an unknown image succeeded: %s", r.Stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.tar")); !os.IsNotExist(err) {
		t.Fatalf("a failed save left its file: %v", err)
	}
	must("rmi", "dk/copy:2")
	if out := must("load", "-q", "-i", archive); !strings.Contains(out, "dk/copy:2") {
		t.Fatalf("load -i printed %q", out)
	}
	must("rmi", "dk/copy:2")
	if r := sbxRun(t, archive, "load", "-q"); r.Code != 0 || !strings.Contains(r.Stdout, "dk/copy:2") {
		t.Fatalf("load from stdin: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if out := must("run", "dk/copy:2", "echo", "loaded"); out != "loaded\n" {
		t.Fatalf("run of the loaded image printed %q", out)
	}

	// top: the sandbox's processes, with PIDs as the sandbox sees them.
	id0 := strings.TrimSpace(must("create", "dk/copy:2"))
	saw(id0)
	must("exec", id0, "--", "sh", "-c", "sleep 9113 >/dev/null 2>&1 &")
	// The background sleep may still be between fork and exec when the
	// exec returns: look again until it shows (bounded).
	var ps []sbx.ProcessInfo
	var pid1, sleeper bool
	for deadline := time.Now().Add(10 * time.Second); !(pid1 && sleeper) && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := json.Unmarshal([]byte(must("top", "--format", "json", id0)), &ps); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			pid1 = pid1 || (p.PID == 1 && p.HostPID > 1 && p.PPID == 0 && p.RSSBytes > 0)
			sleeper = sleeper || (p.Command == "sleep 9113" && p.PID > 1 && p.HostPID != p.PID)
		}
	}
	if !pid1 || !sleeper {
		t.Fatalf("top: %+v", ps)
	}
	if out := must("top", id0); !strings.HasPrefix(out, "PID") || !strings.Contains(out, "sleep 9113") {
		t.Fatalf("top table:\n%s", out)
	}

	// diff: what the sandbox changed, without sbx's own files.
	id := strings.TrimSpace(must("create", "--name", "dk-one", "dk/copy:2"))
	saw(id)
	must("exec", id, "--", "sh", "-c", "echo x > /new; rm /bin/vi; mkdir -p /home/u && echo y > /home/u/f")
	out := must("diff", id)
	for _, want := range []string{"A /new\n", "C /bin\n", "D /bin/vi\n", "A /home/u/f\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.sbx"} {
		if strings.Contains(out, not) {
			t.Errorf("diff lists sbx's own %s:\n%s", not, out)
		}
	}

	// export: the whole root, the sandbox's changes included, sbx's own
	// files left out; the file appears only when complete.
	tarPath := filepath.Join(dir, "root.tar")
	must("export", "-o", tarPath, id)
	names := tarNames(t, tarPath)
	for _, want := range []string{"new", "bin/busybox", "home/u/f"} {
		if !names[want] {
			t.Errorf("export lacks %s (%d entries)", want, len(names))
		}
	}
	for name := range names {
		if name == "bin/vi" || strings.HasPrefix(name, ".sbx") || strings.Contains(name, ".sbx-executor-") {
			t.Errorf("export has %s", name)
		}
	}
	if r := sbxRun(t, "", "export", "-o", filepath.Join(dir, "none.tar"), "dk-nosuch"); r.Code == 0 {
		t.Fatal("export of an unknown sandbox succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "none.tar")); !os.IsNotExist(err) {
		t.Fatalf("a failed export left its file: %v", err)
	}

	// rename: found by the new name only; a name in use is refused.
	must("rename", "dk-one", "dk-renamed")
	if got := strings.TrimSpace(must("ps", "-q", "--filter", "name=dk-renamed")); got != id {
		t.Fatalf("ps by the new name: %q, want %s", got, id)
	}
	if r := sbxRun(t, "", "inspect", "dk-one"); r.Code == 0 {
		t.Fatalf("the old name still finds the sandbox")
	}
	other := strings.TrimSpace(must("create", "--name", "dk-two", "dk/copy:2"))
	saw(other)
	if r := sbxRun(t, "", "rename", "dk-two", "dk-renamed"); r.Code == 0 || !strings.Contains(r.Stderr, "in use") {
		t.Fatalf("rename to a name in use: %d %s", r.Code, r.Stderr)
	}
	if r := sbxRun(t, "", "rename", "dk-two", "bad name!"); r.Code == 0 || !strings.Contains(r.Stderr, "invalid") {
		t.Fatalf("rename to an invalid name: %d %s", r.Code, r.Stderr)
	}
	must("rename", "dk-renamed", "dk-one") // the old name is free again

	// system df sees the three sandboxes and the images.
	var du map[string]int64
	if err := json.Unmarshal([]byte(must("system", "df", "--format", "json")), &du); err != nil {
		t.Fatal(err)
	}
	if du["sandboxes"] != 3 || du["images"] < 2 || du["layers_bytes"] <= 0 {
		t.Fatalf("system df: %v", du)
	}
}
