package images

import (
	"archive/tar"
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// buildContextDir writes files (path -> content) into a new context dir.
func buildContextDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var builtSteps = regexp.MustCompile(`\((\d+) steps, (\d+) cached\)`)

// TestBuildMultiStage: a two-stage Dockerfile with the core instructions
// builds into an image that runs as docker's would; a second build of it
// does no work and gives the same image; a changed input rebuilds from its
// step on.
func TestBuildMultiStage(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "build-base:1")
	ctx := buildContextDir(t, map[string]string{
		"Dockerfile": `ARG BASE=` + base + `
FROM $BASE AS build
ARG GREETING=hi
ENV APP=/app
ENV abc=hello
ENV abc=bye def=$abc
WORKDIR $APP
COPY sub/ ./data/
RUN echo "$GREETING from $(pwd) def=$def" > out.txt
RUN <<EOF
set -e
echo heredoc > /app/h.txt
EOF

FROM ` + base + `
COPY --from=build /app/out.txt /final.txt
COPY --from=build /app/data /data
COPY --chmod=0600 --chown=1000:1000 sub/a.txt /home/
COPY <<EOF /motd
welcome
EOF
LABEL org.example.kind=test
EXPOSE 8080 9000/udp
USER 1000
ENTRYPOINT ["cat"]
CMD ["/final.txt"]
`,
		"sub/a.txt":      "hello\n",
		"sub/deep/b.txt": "deep\n",
		"skip.log":       "no\n",
		".dockerignore":  "*.log\n",
	})
	r := h.Sbx(t, "", "build", "-t", "built:1", "--build-arg", "GREETING=yo", ctx)
	if r.Code != 0 {
		t.Fatalf("build: code %d\n%s", r.Code, r.Stderr)
	}
	digest := strings.TrimSpace(r.Stdout)
	if out := h.Must(t, "run", "--rm", "built:1"); out != "yo from /app def=hello\n" {
		t.Fatalf("the built image's command printed %q", out)
	}
	out := h.Must(t, "run", "--rm", "--entrypoint", "sh", "built:1", "-c",
		"id -u; cat /data/a.txt /data/deep/b.txt /motd; stat -c '%a %u:%g' /home/a.txt; test ! -e /app && echo no-app")
	if want := "1000\nhello\ndeep\nwelcome\n600 1000:1000\nno-app\n"; out != want {
		t.Fatalf("the built image holds\n%q\nwant\n%q", out, want)
	}
	insp := h.Must(t, "image", "inspect", "built:1")
	for _, want := range []string{`"org.example.kind": "test"`, `"8080/tcp"`, `"9000/udp"`, `"user": "1000"`} {
		if !strings.Contains(insp, want) {
			t.Errorf("image config lacks %s:\n%s", want, insp)
		}
	}

	// Unchanged: every layer step from the cache, the same image.
	r = h.Sbx(t, "", "build", "-t", "built:1", "--build-arg", "GREETING=yo", ctx)
	m := builtSteps.FindStringSubmatch(r.Stderr)
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != digest || m == nil || m[2] != "8" || strings.Contains(r.Stderr, "yo from") {
		t.Fatalf("second build was not fully cached (want 8 cached layer steps, digest %s): code %d stdout %q\n%s", digest, r.Code, r.Stdout, r.Stderr)
	}
	// A changed build arg reruns the RUN that sees it, and what follows.
	r = h.Sbx(t, "", "build", "-t", "built:2", "--build-arg", "GREETING=hey", ctx)
	if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "2" {
		t.Fatalf("a changed build arg: want the 2 layer steps before the RUN cached: code %d\n%s", r.Code, r.Stderr)
	}
	// An ignored file changes nothing; a changed COPY source rebuilds from
	// that step on.
	if err := os.WriteFile(filepath.Join(ctx, "skip.log"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r = h.Sbx(t, "", "build", "--build-arg", "GREETING=yo", ctx); strings.TrimSpace(r.Stdout) != digest {
		t.Fatalf("an ignored file changed the build: %q\n%s", r.Stdout, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(ctx, "sub/a.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = h.Sbx(t, "", "build", "-t", "built:3", "--build-arg", "GREETING=yo", ctx)
	if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "1" {
		t.Fatalf("a changed COPY source: want only the WORKDIR step cached: code %d\n%s", r.Code, r.Stderr)
	}
	if out := h.Must(t, "run", "--rm", "--entrypoint", "cat", "built:3", "/home/a.txt"); out != "changed\n" {
		t.Fatalf("rebuilt image holds %q", out)
	}
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) != 0 {
		t.Fatalf("builds left sandboxes: %v", ids)
	}
}

// TestBuildDockerignoreAndTarget: negations in .dockerignore (last match
// wins) and --target, which builds only the stages it needs.
func TestBuildDockerignoreAndTarget(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "build-base:1")
	ctx := buildContextDir(t, map[string]string{
		"Dockerfile":    "FROM " + base + " AS unused\nRUN exit 9\n\nFROM " + base + " AS dev\nCOPY . /ctx/\n\nFROM dev\nRUN exit 7\n",
		"bar":           "1",
		"baz":           "2",
		"bay":           "3",
		"other":         "4",
		".dockerignore": "ba*\n!bay\n",
	})
	r := h.Sbx(t, "", "build", "--target", "dev", "-t", "dev:1", ctx)
	if r.Code != 0 || strings.Contains(r.Stderr, "exit 9") || strings.Contains(r.Stderr, "exit 7") {
		t.Fatalf("build --target dev: code %d\n%s", r.Code, r.Stderr)
	}
	if out := h.Must(t, "run", "--rm", "dev:1", "ls", "-A", "/ctx"); out != ".dockerignore\nDockerfile\nbay\nother\n" {
		t.Fatalf("the context copied was %q", out)
	}
}

// TestBuildRefusesBadInput: errors name the Dockerfile's line, and a failed
// build leaves no image and no sandbox.
func TestBuildRefusesBadInput(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "build-base:1")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, dockerfile, want string }{
		{"unknown instruction", "FROM " + base + "\nFROBNICATE x\n", "line 2"},
		{"source outside the context", "FROM " + base + "\nCOPY ../secret /s\n", "outside the build context"},
		{"missing source", "FROM " + base + "\nCOPY nothing /n\n", "line 2"},
		{"failing RUN", "FROM " + base + "\nRUN true\nRUN echo broken >&2; exit 3\n", "line 3"},
		{"missing image", "FROM " + base + "\nCOPY --from=nosuch:1 /x /x\n", "line 2"},
		{"platform", "FROM --platform=linux/s390x " + base + "\n", "line 1"},
		{"symlink out of the context", "FROM " + base + "\nCOPY link /l\n", "outside the build context"},
	}
	for _, c := range cases {
		ctx := buildContextDir(t, map[string]string{"Dockerfile": c.dockerfile})
		if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ctx, "link")); err != nil {
			t.Fatal(err)
		}
		r := h.Sbx(t, "", "build", "-t", "bad:1", ctx)
		if r.Code == 0 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: code %d, want an error with %q:\n%s", c.name, r.Code, c.want, r.Stderr)
		}
	}
	if r := h.Sbx(t, "", "build", "-t", "bad:1", "--target", "nope", buildContextDir(t, map[string]string{"Dockerfile": "FROM " + base + "\n"})); r.Code == 0 || !strings.Contains(r.Stderr, `no stage called "nope"`) {
		t.Errorf("--target of a missing stage: code %d %s", r.Code, r.Stderr)
	}
	if r := h.Sbx(t, "", "image", "inspect", "bad:1"); r.Code == 0 {
		t.Error("a failed build left the image bad:1")
	}
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) != 0 {
		t.Fatalf("failed builds left sandboxes: %v", ids)
	}
}

// TestBuildOverREST: sbx build --host sends the context (minus
// .dockerignore) to sbx serve, which builds it under its policy and
// streams the output; the image runs there, and a hostile context is
// refused.
func TestBuildOverREST(t *testing.T) {
	p, cli, ref := remoteBuildServer(t, "remote/buildbase:1")
	ctx := buildContextDir(t, map[string]string{
		"Dockerfile":    "FROM " + ref + "\nARG WHO\nCOPY app/ /app/\nRUN echo \"built for $WHO\" && cat /app/* > /all\nCMD [\"cat\", \"/all\"]\n",
		"app/a":         "a\n",
		"app/secret":    "s\n",
		".dockerignore": "app/secret\n",
	})
	r := cli("build", "-t", "remote/built:1", "--build-arg", "WHO=rest", ctx)
	if r.Code != 0 || !strings.Contains(r.Stderr, "built for rest") || !strings.Contains(r.Stderr, "STEP 4/5: RUN") {
		t.Fatalf("remote build: code %d stdout %q\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if r = cli("run", "--rm", "remote/built:1"); r.Code != 0 || r.Stdout != "a\n" {
		t.Fatalf("run of the remotely built image: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = cli("build", "-t", "remote/built:1", "--build-arg", "WHO=rest", ctx); r.Code != 0 || !strings.Contains(r.Stderr, "2 cached") {
		t.Fatalf("second remote build not cached: %d\n%s", r.Code, r.Stderr)
	}
	if r = cli("build", ctx, "--target", "nope"); r.Code == 0 || !strings.Contains(r.Stderr, `no stage called "nope"`) {
		t.Fatalf("remote build of a missing stage: %d %s", r.Code, r.Stderr)
	}
	// A context tar naming a path outside is refused before anything runs.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	resp, err := p.Client(t).Do(context.Background(), http.MethodPost, "/v1/images/build", &buf, "application/x-tar")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a context with ../escape was accepted")
	}
	if !strings.Contains(err.Error(), "outside the context") {
		t.Fatalf("a context with ../escape: %v", err)
	}
	if list, err := p.Client(t).List(context.Background(), sbx.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("sandboxes left on the server after the builds: %v %+v", err, list)
	}
}
