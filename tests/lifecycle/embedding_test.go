package lifecycle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
)

// guideBlocks returns the first ```sh and the first ```go block of the
// section heading of the markdown file.
func guideBlocks(t *testing.T, path, heading string) (shell, program string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no section %q", path, heading)
	}
	section := doc[i+len(heading)+2:]
	if j := strings.Index(section, "\n### "); j >= 0 {
		section = section[:j]
	}
	block := func(lang string) string {
		m := regexp.MustCompile("(?s)\n```" + lang + "\n(.*?)\n```\n").FindStringSubmatch(section)
		if m == nil {
			t.Fatalf("%s, section %q: no ```%s block", path, heading, lang)
		}
		return m[1] + "\n"
	}
	return block("sh"), block("go")
}

// pathWithoutSbx is $PATH without the directories that hold an sbx
// binary (bin/ of the checkout, or an installed one).
func pathWithoutSbx() string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH") + ":/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		if _, err := os.Stat(filepath.Join(dir, "sbx")); err == nil || dir == "" || slices.Contains(keep, dir) {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, ":")
}

// TestEmbeddingGuideProgram builds the complete program of
// docs/embedding.md in its own module, exactly as the guide says (its
// shell block, with a replace to this checkout), and runs it with no sbx
// binary reachable: the one-shot step, the long-lived sandbox and its
// removal work from the library alone, and nothing is left behind.
func TestEmbeddingGuideProgram(t *testing.T) {
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	shell, program := guideBlocks(t, filepath.Join(checkout, "docs", "embedding.md"), "### A complete program")
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "ci-runner"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "ci-runner", "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	// The guide's `export SBX=/path/to/sbx` names the checkout.
	var script []string
	for _, line := range strings.Split(shell, "\n") {
		if strings.HasPrefix(line, "export SBX=") {
			line = "export SBX=" + checkout
		}
		script = append(script, line)
	}
	path := pathWithoutSbx()
	env := []string{"PATH=" + path, "HOME=" + os.Getenv("HOME")}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOSUMDB", "GOTOOLCHAIN"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	build := exec.Command("sh", "-ec", strings.Join(script, "\n"))
	build.Dir, build.Env = work, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the guide's build steps failed: %v\n%s\nscript:\n%s", err, out, strings.Join(script, "\n"))
	}

	// No sbx binary anywhere the program could find one.
	runEnv := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", cgroup.ParentEnv + "=" + os.Getenv(cgroup.ParentEnv)}
	for _, dir := range filepath.SplitList("/usr/sbin:/usr/bin:/sbin:/bin") {
		if _, err := os.Stat(filepath.Join(dir, "sbx")); err == nil {
			t.Fatalf("%s/sbx exists: the test needs a machine without an installed sbx", dir)
		}
	}
	// The runtime root is short: it holds the executors' unix sockets.
	root, runRoot := filepath.Join(work, "root"), filepath.Join(os.Getenv("SBX_RUN_ROOT"), "embedding")
	defer os.RemoveAll(runRoot)
	cgroupsBefore := cgroup.Leftovers()
	run := exec.Command(filepath.Join(work, "ci-runner", "ci-runner"), "-root", root, "-run-root", runRoot, "-rootfs", fixture.BusyboxRootfs(t))
	run.Env = runEnv
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("ci-runner: %v\n%s", err, out)
	}
	got := string(out)
	t.Logf("ci-runner's output:\n%s", got)
	for _, want := range []string{
		"building\nstep: nonzero_exit exit=3 ",
		"hello from ",
		"exec: exit=0 signal=\"\"\n",
		"exec: exit=7 signal=\"\"\n",
		"removed ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ci-runner's output lacks %q:\n%s", want, got)
		}
	}

	// Nothing is left: no sandbox, mount or cgroup of the program's.
	host, err := sandbox.Open(sandbox.HostConfig{Root: root, RunRoot: runRoot})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if list, err := host.List(context.Background(), sbx.Filter{}); err != nil || len(list) > 0 {
		t.Errorf("sandboxes left after ci-runner: %v %v", list, err)
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, work) || strings.Contains(line, runRoot+"/") {
			t.Errorf("mount left after ci-runner: %s", line)
		}
	}
	for id, paths := range cgroup.Leftovers() {
		if _, before := cgroupsBefore[id]; !before {
			t.Errorf("cgroups left after ci-runner: %s %v", id, paths)
		}
	}
}
