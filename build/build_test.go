package build

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/sbxrun/sbx"
)

func TestParseRefusesWithTheLine(t *testing.T) {
	cases := map[string]string{
		"FROM a\nFROBNICATE x\n":                              "line 2",
		"FROM a\nRUN --mount=type=ssh,mode=0666 x\n":          "line 2: RUN: --mount=type=ssh",
		"FROM a\nRUN --security=insecure x\n":                 "line 2: RUN: --security",
		"FROM a\nRUN --network=host x\n":                      "line 2: RUN: --network=host",
		"FROM a\nADD git@github.com:o/r.git /x\n":             "line 2: ADD",
		"FROM a\nADD ssh://git@h/o/r#main /x\n":               "line 2: ADD: \"ssh://git@h/o/r#main\": ADD of a git repository",
		"FROM a\nADD https://h/o/r.git#v1 /x\n":               "line 2: ADD: \"https://h/o/r.git#v1\": ADD of a git repository",
		"FROM a\nADD --checksum=sha256:00 f /x\n":             "line 2: ADD: --checksum",
		"FROM a\nONBUILD ONBUILD RUN x\n":                     "line 2",
		"RUN x\n":                                             "",
		"FROM a\nCOPY <<EOF\n":                                "",
		"FROM a AS b\nFROM b\nCOPY --parents --from=b x /y\n": "line 3: COPY: --parents",
		"FROM a\nADD --keep-git-dir https://h/r.git /y\n":     "line 2: ADD: --keep-git-dir",
		"# only a comment\n":                                  "",
		"FROM a\nHEALTHCHECK --interval=bad CMD true\n":       "line 2",
	}
	for text, want := range cases {
		_, err := parse("Dockerfile", []byte(text))
		if err == nil || !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("parse(%q) = %v, want an invalid-request error with %q", text, err, want)
		}
	}
}

func TestPlanBuildsWhatTheTargetNeeds(t *testing.T) {
	f, err := parse("Dockerfile", []byte(`FROM a AS tools
FROM a AS unused
FROM a AS base
FROM base AS app
COPY --from=tools /t /t
FROM app AS last
`))
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string][]int{"": {0, 2, 3, 4}, "app": {0, 2, 3}, "UNUSED": {1}, "0": {0}} {
		got, err := f.plan(target)
		if err != nil || !equalInts(got, want) {
			t.Errorf("plan(%q) = %v, %v; want %v", target, got, err, want)
		}
	}
	if _, err := f.plan("nope"); err == nil || !strings.Contains(err.Error(), `no stage called "nope"`) {
		t.Errorf("plan of a missing target: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestExpansionKeepsValuesWithinAnInstruction: after ENV abc=hello and
// ENV abc=bye def=$abc, def is hello (docker's rule); ENV wins over ARG.
func TestExpansionKeepsValuesWithinAnInstruction(t *testing.T) {
	f, err := parse("Dockerfile", []byte("FROM a\nARG who=arg\nENV abc=hello\nENV abc=bye def=$abc\nENV who=env\nENV x=$who\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := newArgs(map[string]string{"who": "cli"})
	s := &stageState{sc: &scope{lex: shell.NewLex(f.escape), args: map[string]string{}}}
	b := &builder{args: a}
	for _, c := range f.stages[0].Commands {
		if arg, ok := c.(*instructions.ArgCommand); ok {
			a.declare(arg, s.sc.args, false)
			continue
		}
		if err := s.sc.expand(c); err != nil {
			t.Fatal(err)
		}
		if err := b.metadata(s, c); err != nil {
			t.Fatal(err)
		}
		s.sc.env = s.cfg.Env
	}
	want := "abc=bye def=hello who=env x=env"
	if got := strings.Join(s.cfg.Env, " "); got != want {
		t.Fatalf("env %q, want %q", got, want)
	}
	if !a.used["who"] {
		t.Error("the build arg who was not marked used")
	}
	if env := strings.Join(s.sc.runEnv(), " "); env != want {
		t.Errorf("a RUN's environment %q: ENV must win over the ARG of the same name", env)
	}
}

func TestContextSourcesStayInside(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "d/e"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "d/e/f.txt"), []byte("f"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "d/skip.log"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "d/keep.log"), []byte("k"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out")))
	must(t, os.Symlink("e/f.txt", filepath.Join(dir, "d/in")))
	must(t, os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("**/*.log\n!d/keep.log\n"), 0o644))
	bc, err := openContext(dir, filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.close()
	for _, src := range []string{"../x", "d/../../x", "out"} {
		if _, _, err := bc.sources([]string{src}); err == nil || !strings.Contains(err.Error(), "outside the build context") {
			t.Errorf("source %q: %v, want refused as outside the build context", src, err)
		}
	}
	es, single, err := bc.sources([]string{"d"})
	if err != nil || single {
		t.Fatalf("sources(d) = %v, %v", single, err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.name)
		if e.name == "in" && e.link != "e/f.txt" {
			t.Errorf("a symlink inside the context was not kept as a link: %+v", e)
		}
	}
	if got := strings.Join(names, " "); got != "e e/f.txt in keep.log" {
		t.Errorf("sources(d) named %q", got)
	}
	if _, _, err := bc.sources([]string{"d/skip.log"}); err == nil || !strings.Contains(err.Error(), ".dockerignore") {
		t.Errorf("an ignored source: %v", err)
	}
	h1, _ := bc.hash(es)
	must(t, os.Chtimes(filepath.Join(dir, "d/e/f.txt"), timeZero, timeZero))
	if h2, _ := bc.hash(es); h1 != h2 {
		t.Error("the content hash changed with a file's time")
	}
	must(t, os.WriteFile(filepath.Join(dir, "d/e/f.txt"), []byte("g"), 0o644))
	es, _, _ = bc.sources([]string{"d"})
	if h3, _ := bc.hash(es); h3 == h1 {
		t.Error("the content hash did not change with a file's content")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var timeZero = time.Unix(1, 0)

// TestBuildRefusesAnAgentThatIsNotASocket gives the library (not the
// CLI, which checks its --ssh too) a key file and a missing path as ssh
// agents: the build refuses both before anything runs.
func TestBuildRefusesAnAgentThatIsNotASocket(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM a\nRUN --mount=type=ssh true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{key: "is not a socket", filepath.Join(dir, "gone"): "no such file"} {
		_, err := Build(t.Context(), nil, sbx.BuildOptions{ContextDir: dir, SSH: map[string]string{"default": path}})
		if !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), "ssh agent default") || !strings.Contains(err.Error(), want) {
			t.Errorf("build with ssh agent %s: %v, want an invalid-request error with %q", path, err, want)
		}
	}
	l, err := net.Listen("unix", filepath.Join(dir, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := sbx.CheckSSHAgent(l.Addr().String()); err != nil {
		t.Errorf("a unix socket as the agent: %v", err)
	}
}
