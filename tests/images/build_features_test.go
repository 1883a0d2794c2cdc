package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// buildFeature is one row of the Dockerfile feature list
// (docs/images.md): a self-checking Dockerfile (a failing RUN fails the
// build), its context, extra build flags, and checks of the image built.
type buildFeature struct {
	name       string
	dockerfile string            // BASE stands for the busybox image
	files      map[string]string // the context
	prep       func(t *testing.T, dir string)
	flags      []string
	wantErr    string                                        // the build must fail with this in its output
	check      func(t *testing.T, f *featureRun, tag string) // after a build that passed
}

// featureRun is the state the feature checks share.
type featureRun struct {
	h    *harness.Host
	base string
	web  string // http://127.0.0.1:PORT, in the host namespace of the builds
	dir  string // the context of the feature being checked
}

// run runs argv in a sandbox of image and returns its stdout.
func (f *featureRun) run(t *testing.T, image string, argv ...string) string {
	t.Helper()
	return f.h.Must(t, append([]string{"run", "--rm", "--entrypoint", argv[0], image}, argv[1:]...)...)
}

// config is the config of image.
func (f *featureRun) config(t *testing.T, image string) sbx.ImageConfig {
	t.Helper()
	var img sbx.Image
	if err := json.Unmarshal([]byte(f.h.Must(t, "image", "inspect", image)), &img); err != nil {
		t.Fatalf("image inspect %s: %v", image, err)
	}
	if img.Config == nil {
		return sbx.ImageConfig{}
	}
	return *img.Config
}

// build builds dockerfile (with the context files) as tag.
func (f *featureRun) build(t *testing.T, tag, dockerfile string, files map[string]string, flags ...string) harness.Result {
	t.Helper()
	all := map[string]string{"Dockerfile": strings.ReplaceAll(dockerfile, "BASE", f.base)}
	for k, v := range files {
		all[k] = v
	}
	dir := buildContextDir(t, all)
	f.dir = dir
	return f.h.Sbx(t, "", append(append([]string{"build", "-t", tag}, flags...), dir)...)
}

// serveInNS serves h over HTTP on 127.0.0.1 inside the network namespace
// called ns and returns its base URL; it stops with the test.
func serveInNS(t *testing.T, ns string, h http.Handler) string {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // left to die: it changed namespace
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, err}
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in %s: %v", ns, r.err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(r.ln) }()
	t.Cleanup(func() { srv.Close() })
	return "http://" + r.ln.Addr().String()
}

// tarFiles is a tar stream of files (name -> content), 0644, root-owned.
func tarFiles(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipOf(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func xzOf(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// execOut runs a host command and returns its combined output.
func execOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// wantOut fails unless got is want.
func wantOut(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// TestBuildFeatures builds the Dockerfile feature list of docs/images.md
// on the busybox test image, one Dockerfile per feature: each checks
// itself with RUN steps where it can, and the image built is checked from
// outside (files, owners, modes, config, what runs).
func TestBuildFeatures(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	f := &featureRun{h: h, base: h.ImportBusybox(t, "feat-base:1")}
	bz2 := filepath.Join(t.TempDir(), "p.tar")
	if err := os.WriteFile(bz2, tarFiles(t, map[string]string{"bz/inside": "bz2\n"}), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := execOut("bzip2", "-k", bz2); err != nil {
		t.Fatalf("bzip2: %v %s", err, out)
	}
	bz2Data, err := os.ReadFile(bz2 + ".bz2")
	if err != nil {
		t.Fatal(err)
	}
	served := gzipOf(t, tarFiles(t, map[string]string{"remote/x": "x\n"}))
	f.web = serveInNS(t, h.Netns, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/r.tar.gz":
			_, _ = w.Write(served)
		case "/plain.txt":
			_, _ = w.Write([]byte("from the web\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	secretFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(secretFile, []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	arch := runtime.GOARCH

	features := []buildFeature{
		{name: "01 ENV keeps values within one instruction", dockerfile: `FROM BASE
ENV A=1
ENV A=2 B=$A
RUN test "$A" = 2 && test "$B" = 1
`},
		{name: "02 ENV forms and quoting", dockerfile: `FROM BASE
ENV x="a b" y=c\ d
ENV k v w
RUN test "$x" = "a b" && test "$y" = "c d" && test "$k" = "v w"
`, check: func(t *testing.T, f *featureRun, tag string) {
			env := strings.Join(f.config(t, tag).Env, "\n")
			for _, want := range []string{"x=a b", "y=c d", "k=v w"} {
				if !strings.Contains(env, want) {
					t.Errorf("config env lacks %q: %s", want, env)
				}
			}
		}},
		{name: "03 meta ARG in FROM, redeclared in the stage", dockerfile: `ARG IMG=BASE
ARG V=meta
FROM $IMG
RUN test -z "$V"
ARG V
RUN test "$V" = meta
`},
		{name: "04 ENV overrides ARG", dockerfile: `FROM BASE
ARG U=a
ENV U=b
RUN test "$U" = b
`},
		{name: "05 expansion modifiers", dockerfile: `FROM BASE
ARG A
ENV X=${A:-def}
ENV Y=${X%%e*} Z=${X:+set} W=${X/e/E}
RUN test "$X" = def && test "$Y" = d && test "$Z" = set && test "$W" = dEf
`},
		{name: "05b expansion ${A:?} fails when unset", dockerfile: `FROM BASE
ARG A
ENV Z=${A:?Amissing}
`, wantErr: "Amissing"},
		{name: "06 build args reach RUN, not the config; proxy args need no ARG", dockerfile: `FROM BASE
ARG TOKEN
RUN test "$TOKEN" = tok && case "$HTTP_PROXY" in http://*invalid:3128) ;; *) exit 1 ;; esac
`, flags: []string{"--build-arg", "TOKEN=tok", "--build-arg", "HTTP_PROXY=http://proxy.invalid:3128"},
			check: func(t *testing.T, f *featureRun, tag string) {
				cfg := f.config(t, tag)
				if env := strings.Join(cfg.Env, " "); strings.Contains(env, "TOKEN") || strings.Contains(env, "PROXY") {
					t.Errorf("build args reached the image config: %s", env)
				}
				if hist := f.h.Must(t, "history", "--no-trunc", tag); strings.Contains(hist, "proxy.invalid") {
					t.Errorf("an undeclared proxy arg reached the history:\n%s", hist)
				}
			}},
		{name: "07 platform ARGs", dockerfile: `FROM BASE
RUN test -z "$TARGETARCH"
ARG TARGETARCH
ARG TARGETPLATFORM
RUN test "$TARGETARCH" = ` + arch + ` && test "$TARGETPLATFORM" = linux/` + arch + `
`},
		{name: "08 WORKDIR creates and chains", dockerfile: `FROM BASE
WORKDIR /a
WORKDIR b
RUN test "$PWD" = /a/b && test "$(stat -c %a /a/b)" = 755
`, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "working dir", f.config(t, tag).WorkingDir, "/a/b")
		}},
		{name: "09 WORKDIR owned by USER", dockerfile: `FROM BASE
USER user
WORKDIR /data
RUN test "$(stat -c %U:%G /data)" = user:user && touch /data/mine
`},
		{name: "10 USER name and group forms, supplementary groups", dockerfile: `FROM BASE
RUN echo staff:x:50:user >> /etc/group
USER user:staff
RUN test "$(id -u):$(id -g)" = 1000:50
USER 1000
RUN test "$(id -u)" = 1000 && id -G | grep -qw 50
USER user
RUN id -G | grep -qw 50
`},
		{name: "11 HOME follows USER", dockerfile: `FROM BASE
USER user
RUN test "$HOME" = /home/user && echo x > $HOME/f
`, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "file in HOME", f.run(t, tag, "stat", "-c", "%U", "/home/user/f"), "user\n")
		}},
		{name: "12 COPY without --chown is 0:0, mode kept", dockerfile: `FROM BASE
COPY f /f
RUN test "$(stat -c '%a %u:%g' /f)" = "751 0:0"
`, files: map[string]string{"f": "f\n"}, prep: func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "f"), 0o751); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "13 COPY --chown by id, name, group-only", dockerfile: `FROM BASE
ARG OWNER=nobody
COPY --chown=1000: a /x/
COPY --chown=${OWNER} b /y/z/
COPY --chown=:nogroup a /g
RUN test "$(stat -c %u:%g /x/a)" = 1000:1000 && test "$(stat -c %u:%g /y/z/b)" = 65534:65534 && test "$(stat -c %u:%g /g)" = 0:65534
`, files: map[string]string{"a": "a", "b": "b"}},
		{name: "14 COPY --chmod octal, expanded, symbolic, on dirs", dockerfile: `FROM BASE
ARG M=0600
COPY --chmod=0755 dir /d
COPY --chmod=${M} f /f
COPY --chmod=u+x,g-r f /s
RUN test "$(stat -c %a /d)" = 755 && test "$(stat -c %a /d/x)" = 755 && test "$(stat -c %a /f)" = 600 && test "$(stat -c %a /s)" = 704
`, files: map[string]string{"dir/x": "x", "f": "f"}},
		{name: "15 COPY path semantics", dockerfile: `FROM BASE
COPY dir/ /d
COPY *.go /src/
COPY f /new/
WORKDIR /w
COPY f $EMPTY
COPY f /over
COPY g /over
RUN test -f /d/x && test ! -e /d/dir && test -f /src/a.go && test -f /src/b.go && test ! -e /src/c.txt && test -f /new/f && test -f /w/f && test "$(cat /over)" = g
`, files: map[string]string{"dir/x": "x", "a.go": "a", "b.go": "b", "c.txt": "c", "f": "f", "g": "g"}},
		{name: "16 multi-stage --from by name, index, image, wildcard", dockerfile: `FROM BASE AS build
RUN mkdir /out && echo one > /out/o1 && echo two > /out/o2
FROM BASE
COPY --from=build /out/o1 /a
COPY --from=0 /out /b
COPY --from=BASE /etc/passwd /pw
COPY --from=build /out/o* /w/
RUN test "$(cat /a)" = one && test -f /b/o2 && grep -q user /pw && test "$(cat /w/o1 /w/o2 | tr '\n' ' ')" = "one two "
`},
		{name: "17 --target, unused stages skipped", dockerfile: `FROM BASE AS unused
RUN exit 9
FROM BASE AS dev
RUN echo dev > /stage
FROM dev
RUN exit 7
`, flags: []string{"--target", "dev"}, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "stage built", f.run(t, tag, "cat", "/stage"), "dev\n")
		}},
		{name: "18 ADD of local archives (tar, gzip, bzip2, xz), told by content", dockerfile: `FROM BASE
ADD plain.tar gz.dat bz.tbz xz.txz /arc/
ADD notarchive.tar.gz /n/
RUN test "$(cat /arc/p/inside /arc/g/inside /arc/bz/inside /arc/x/inside | tr '\n' ' ')" = "plain gz bz2 xz " && test "$(cat /n/notarchive.tar.gz)" = "just text"
`, prep: func(t *testing.T, dir string) {
			for name, data := range map[string][]byte{
				"plain.tar":         tarFiles(t, map[string]string{"p/inside": "plain\n"}),
				"gz.dat":            gzipOf(t, tarFiles(t, map[string]string{"g/inside": "gz\n"})),
				"bz.tbz":            bz2Data,
				"xz.txz":            xzOf(t, tarFiles(t, map[string]string{"x/inside": "xz\n"})),
				"notarchive.tar.gz": []byte("just text"),
			} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "18b ADD of a URL: downloaded, mode 600, not extracted", dockerfile: `FROM BASE
ADD WEB/r.tar.gz /u/
ADD WEB/plain.txt /p.txt
RUN test "$(stat -c %a /u/r.tar.gz)" = 600 && test ! -e /u/remote && test "$(cat /p.txt)" = "from the web"
`, flags: []string{"--network", "bridge"}},
		{name: "18c ADD of a URL needs the build's network", dockerfile: `FROM BASE
ADD WEB/plain.txt /p.txt
`, wantErr: "--network bridge"},
		{name: "19 .dockerignore negation, last match wins", dockerfile: `FROM BASE
COPY . /ctx/
RUN test "$(ls /ctx | tr '\n' ' ')" = "Dockerfile bay other "
`, files: map[string]string{"bar": "1", "baz": "2", "bay": "3", "other": "4", ".dockerignore": "ba*\n!bay\n.dockerignore\n"}},
		{name: "20 deletions become whiteouts", dockerfile: `FROM BASE
RUN mkdir -p /d/sub && touch /d/f /d/sub/g && mkdir /r && touch /r/in
RUN rm /d/f && rm -r /r && echo file > /r && rm /bin/vi
`, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "after deletions", f.run(t, tag, "sh", "-c", "test ! -e /d/f && test -e /d/sub/g && test -f /r && test ! -e /bin/vi && echo ok"), "ok\n")
		}},
		{name: "21 hard links survive a layer", dockerfile: `FROM BASE
RUN echo h > /h1 && ln /h1 /h2
`, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "hard link", f.run(t, tag, "sh", "-c", `test "$(stat -c %i /h1)" = "$(stat -c %i /h2)" && stat -c %h /h1`), "2\n")
		}},
		{name: "22 SHELL changes RUN and shell-form CMD", dockerfile: `FROM BASE
SHELL ["/bin/sh", "-xc"]
RUN echo traced
CMD echo hi
`, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "cmd", strings.Join(f.config(t, tag).Cmd, "|"), "/bin/sh|-xc|echo hi")
		}},
		{name: "23 FROM scratch, ENTRYPOINT shell form, default PATH", dockerfile: `FROM scratch
COPY --from=BASE /bin/busybox /bin/busybox
ENTRYPOINT foo bar
`, check: func(t *testing.T, f *featureRun, tag string) {
			cfg := f.config(t, tag)
			wantOut(t, "entrypoint", strings.Join(cfg.Entrypoint, "|"), "/bin/sh|-c|foo bar")
			if !strings.Contains(strings.Join(cfg.Env, " "), "PATH="+sbx.DefaultPath) {
				t.Errorf("a scratch image lacks the default PATH: %v", cfg.Env)
			}
			wantOut(t, "scratch image", f.run(t, tag, "/bin/busybox", "ls", "/bin"), "busybox\n")
		}},
		{name: "24 metadata into the config", dockerfile: `FROM BASE
ARG PORTS="3000 4000/udp"
EXPOSE $PORTS
HEALTHCHECK --interval=5s --retries=2 CMD true
LABEL a=1 "b c"="d e"
STOPSIGNAL SIGINT
VOLUME ["/v1", "/v2"]
RUN mkdir -p /v1 && echo kept > /v1/after
`, check: func(t *testing.T, f *featureRun, tag string) {
			cfg := f.config(t, tag)
			wantOut(t, "ports", strings.Join(cfg.ExposedPorts, " "), "3000/tcp 4000/udp")
			if hc := cfg.Healthcheck; hc == nil || strings.Join(hc.Test, " ") != "CMD-SHELL true" || hc.Interval != 5*time.Second || hc.Retries != 2 {
				t.Errorf("healthcheck: %+v", hc)
			}
			wantOut(t, "labels", fmt.Sprint(cfg.Labels), "map[a:1 b c:d e]")
			wantOut(t, "stop signal", cfg.StopSignal, "SIGINT")
			wantOut(t, "volumes", strings.Join(cfg.Volumes, " "), "/v1 /v2")
			wantOut(t, "write after VOLUME", f.run(t, tag, "cat", "/v1/after"), "kept\n")
		}},
		{name: "25 ONBUILD runs in the child, not further", dockerfile: `FROM BASE
ONBUILD RUN echo triggered > /ob
ONBUILD ENV FROM_PARENT=1
RUN test ! -e /ob
`, check: func(t *testing.T, f *featureRun, tag string) {
			if cfg := f.config(t, tag); len(cfg.OnBuild) != 2 {
				t.Fatalf("parent's onbuild triggers: %q", cfg.OnBuild)
			}
			r := f.build(t, "feat-child:1", "FROM "+tag+"\nRUN test \"$(cat /ob)\" = triggered && test \"$FROM_PARENT\" = 1\n", nil)
			if r.Code != 0 {
				t.Fatalf("child build: %d\n%s", r.Code, r.Stderr)
			}
			if cfg := f.config(t, "feat-child:1"); len(cfg.OnBuild) != 0 {
				t.Errorf("the child inherited the triggers: %q", cfg.OnBuild)
			}
			if r := f.build(t, "feat-bad:1", "FROM BASE\nONBUILD ONBUILD RUN true\n", nil); r.Code == 0 || !strings.Contains(r.Stderr, "line 2") {
				t.Errorf("ONBUILD ONBUILD: %d %s", r.Code, r.Stderr)
			}
		}},
		{name: "26 heredocs", dockerfile: `FROM BASE
ENV WHO=world
RUN <<EOF
set -e
echo "hello $WHO" > /h1
EOF
RUN <<EOF
#!/bin/sh
echo script > /h2
EOF
COPY <<'EOF' /q
$WHO
EOF
COPY <<EOF /e
$WHO
EOF
RUN test "$(cat /h1)" = "hello world" && test "$(cat /h2)" = script && test "$(cat /q)" = '$WHO' && test "$(cat /e)" = world
`},
		{name: "27 RUN --mount cache, bind, tmpfs", dockerfile: `FROM BASE AS src
RUN mkdir /out && echo staged > /out/s
FROM BASE
RUN --mount=type=cache,target=/var/cache/app echo run >> /var/cache/app/log && wc -l < /var/cache/app/log > /runs
RUN --mount=type=cache,target=/var/cache/app,id=other test ! -e /var/cache/app/log
RUN --mount=type=bind,source=dir,target=/mnt/ctx cat /mnt/ctx/x > /from-bind && ! touch /mnt/ctx/nope
RUN --mount=type=bind,from=src,source=/out,target=/mnt/st,rw cat /mnt/st/s > /from-stage && touch /mnt/st/discarded
RUN --mount=type=tmpfs,target=/scratch echo t > /scratch/t && test "$(cat /scratch/t)" = t
`, files: map[string]string{"dir/x": "ctx\n"}, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "after mounts", f.run(t, tag, "sh", "-c", "cat /runs /from-bind /from-stage; test ! -e /var/cache/app && test ! -e /mnt/ctx && test ! -e /scratch && echo clean"),
				"1\nctx\nstaged\nclean\n")
			// The cache outlives the build: a rebuild without the step
			// cache finds the first run's line.
			r := f.h.Sbx(t, "", "build", "--no-cache", "-t", tag+"-again", f.dir)
			if r.Code != 0 {
				t.Fatalf("rebuild: %d\n%s", r.Code, r.Stderr)
			}
			wantOut(t, "cache mount after a second build", f.run(t, tag+"-again", "cat", "/runs"), "2\n")
		}},
		{name: "28 secret mount: absent from layer, history and cache key", dockerfile: `FROM BASE
RUN --mount=type=secret,id=tok,required grep -qx s3.r3t /run/secrets/tok && echo used > /used
RUN --mount=type=secret,id=tok,env=TOK case "$TOK" in s3?r3t) ;; *) exit 1 ;; esac
RUN --mount=type=secret,id=opt,required=false test ! -e /run/secrets/opt
`, flags: []string{"--secret", "id=tok,src=" + secretFile}, check: func(t *testing.T, f *featureRun, tag string) {
			wantOut(t, "after the secret", f.run(t, tag, "sh", "-c", "cat /used; test ! -e /run/secrets/tok && echo absent"), "used\nabsent\n")
			if hist := f.h.Must(t, "history", "--no-trunc", tag); strings.Contains(hist, "s3cr3t") {
				t.Errorf("the secret is in the history:\n%s", hist)
			}
			if err := os.WriteFile(secretFile, []byte("other"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := f.h.Sbx(t, "", "build", "--secret", "id=tok,src="+secretFile, f.dir)
			if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "3" {
				t.Errorf("a changed secret value should not change the cache key: %d\n%s", r.Code, r.Stderr)
			}
			if r := f.h.Sbx(t, "", "build", "--no-cache", f.dir); r.Code == 0 || !strings.Contains(r.Stderr, "line 2") || !strings.Contains(r.Stderr, "--secret") {
				t.Errorf("a missing required secret: %d %s", r.Code, r.Stderr)
			}
			if out, _ := execOut("grep", "-rl", "s3cr3t", f.h.Root); strings.TrimSpace(out) != "" {
				t.Errorf("the secret landed in sbx's state: %s", out)
			}
		}},
		{name: "29 cache correctness", dockerfile: `FROM BASE
COPY a /a
RUN cat /a > /copy
COPY b /b
RUN cat /a /b > /both
`, files: map[string]string{"a": "1", "b": "2"}, check: func(t *testing.T, f *featureRun, tag string) {
			r := f.h.Sbx(t, "", "build", "-t", tag, f.dir)
			if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "4" {
				t.Fatalf("unchanged rebuild: want 4 cached: %d\n%s", r.Code, r.Stderr)
			}
			if err := os.WriteFile(filepath.Join(f.dir, "b"), []byte("3"), 0o644); err != nil {
				t.Fatal(err)
			}
			r = f.h.Sbx(t, "", "build", "-t", tag, f.dir)
			if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "2" {
				t.Fatalf("changed b: want the 2 steps before COPY b cached: %d\n%s", r.Code, r.Stderr)
			}
			wantOut(t, "rebuilt", f.run(t, tag, "cat", "/both"), "13")
		}},
		{name: "30 COPY --parents keeps the source's directories", dockerfile: `FROM BASE
COPY --parents ./x/a.txt ./y/a.txt /parents/
COPY --parents ./x/./y/*.txt /rel/
COPY --parents src/**/*.txt /deep
RUN test "$(cat /parents/x/a.txt /parents/y/a.txt)" = "xaya" && test "$(cat /rel/y/b.txt)" = b && test ! -e /rel/x
RUN test -f /deep/src/a.txt && test -f /deep/src/x/b.txt && test -f /deep/src/x/y/c.txt && test ! -e /deep/src/x/d.go
`, files: map[string]string{"x/a.txt": "xa", "y/a.txt": "ya", "x/y/b.txt": "b", "x/y/c.md": "c",
			"src/a.txt": "a", "src/x/b.txt": "b", "src/x/y/c.txt": "c", "src/x/d.go": "d"}},
		{name: "31 COPY and ADD --exclude", dockerfile: `FROM BASE
COPY --exclude=*.txt hom* /mydir/
COPY --exclude=*.txt --exclude=*.md hom* /two/
ADD --exclude=x/y src /added/
RUN test ! -e /mydir/home.txt && test -f /mydir/notes.md && test -f /mydir/keep
RUN test ! -e /two/notes.md && test -f /two/keep && test ! -e /added/x/y && test -f /added/x/b.txt
`, files: map[string]string{"home.txt": "h", "homes/notes.md": "n", "homes/keep": "k", "src/x/b.txt": "b", "src/x/y/c.txt": "c"},
			check: func(t *testing.T, f *featureRun, tag string) {
				// An excluded file is no input: changing it rebuilds nothing.
				if err := os.WriteFile(filepath.Join(f.dir, "home.txt"), []byte("changed"), 0o644); err != nil {
					t.Fatal(err)
				}
				r := f.h.Sbx(t, "", "build", "-t", tag, f.dir)
				if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "5" {
					t.Fatalf("a changed excluded file rebuilt steps: %d\n%s", r.Code, r.Stderr)
				}
			}},
	}
	for i, c := range features {
		t.Run(c.name, func(t *testing.T) {
			files := c.files
			df := strings.ReplaceAll(c.dockerfile, "WEB", f.web)
			tag := fmt.Sprintf("feat-%02d:1", i)
			all := map[string]string{"Dockerfile": strings.ReplaceAll(df, "BASE", f.base)}
			for k, v := range files {
				all[k] = v
			}
			dir := buildContextDir(t, all)
			if c.prep != nil {
				c.prep(t, dir)
			}
			f.dir = dir
			r := h.Sbx(t, "", append(append([]string{"build", "-t", tag}, c.flags...), dir)...)
			if c.wantErr != "" {
				if r.Code == 0 || !strings.Contains(r.Stderr, c.wantErr) {
					t.Fatalf("build: code %d, want a failure with %q:\n%s", r.Code, c.wantErr, r.Stderr)
				}
				return
			}
			if r.Code != 0 {
				t.Fatalf("build: code %d\n%s", r.Code, r.Stderr)
			}
			if c.check != nil {
				c.check(t, f, tag)
			}
		})
	}
	if ids := strings.Fields(h.Must(t, "ps", "-aq")); len(ids) != 0 {
		t.Fatalf("builds left sandboxes: %v", ids)
	}
	// The host side of the mounts went with their steps; a crashed
	// build's is collected by gc.
	tmp, secrets := filepath.Join(h.Root, "build", "tmp"), filepath.Join(h.Run, "build-secrets")
	for _, d := range []string{tmp, secrets} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Errorf("builds left %d entries in %s", len(left), d)
		}
	}
	crashed := filepath.Join(secrets, "step-2147483646-x")
	if err := os.MkdirAll(crashed, 0o700); err != nil {
		t.Fatal(err)
	}
	if out := h.Must(t, "gc"); !strings.Contains(out, "step-2147483646-x") {
		t.Errorf("gc did not report the crashed build's directory: %s", out)
	}
	if _, err := os.Stat(crashed); !os.IsNotExist(err) {
		t.Errorf("gc left a crashed build's directory: %v", err)
	}
}
