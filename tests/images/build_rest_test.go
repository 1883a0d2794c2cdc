package images

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// restSecret is the value TestBuildSecretsOverREST sends; its Dockerfile
// matches it with a pattern, so that only the secret itself can hold it.
const restSecret = "rest-s3cr3t-7f1c"

// TestBuildSecretsOverREST: sbx build --host --secret sends the secret in
// the request's body to sbx serve, whose RUN steps that mount it see it;
// it lands in no layer, no history line, no cache key (a changed value
// builds nothing again) and no line of the server's log (at debug level),
// nor anywhere under its state directories. A bad secrets part is refused
// without being quoted. sbx build prune --host empties the server's build
// cache, so the next build does its steps again.
func TestBuildSecretsOverREST(t *testing.T) {
	p, cli, ref := remoteBuildServer(t, "remote/secretbase:1", "--log-level", "debug")
	ctx := buildContextDir(t, map[string]string{"Dockerfile": "FROM " + ref + "\n" +
		"RUN --mount=type=secret,id=tok,required grep -qx 'rest-s3.r3t-7f1c' /run/secrets/tok && echo used > /used\n" +
		"RUN --mount=type=secret,id=tok,env=TOK case \"$TOK\" in rest-s3?r3t-7f1c) echo env > /env ;; *) exit 1 ;; esac\n"})
	secretFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(secretFile, []byte(restSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli("build", "-t", "remote/secret:1", "--secret", "id=tok,src="+secretFile, ctx)
	if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "0" {
		t.Fatalf("remote build with a secret: %d\n%s", r.Code, r.Stderr)
	}
	if r = cli("run", "--rm", "remote/secret:1", "sh", "-c", "cat /used /env; test ! -e /run/secrets/tok && echo absent"); r.Code != 0 || r.Stdout != "used\nenv\nabsent\n" {
		t.Fatalf("the image built with a secret: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = cli("history", "--no-trunc", "remote/secret:1"); r.Code != 0 || strings.Contains(r.Stdout, restSecret) {
		t.Fatalf("history (code %d) holds the secret:\n%s", r.Code, r.Stdout)
	}
	// Another value: every step cached (the value is in no key).
	if err := os.WriteFile(secretFile, []byte("rest-s3Xr3t-7f1c"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = cli("build", "-t", "remote/secret:1", "--secret", "id=tok,src="+secretFile, ctx)
	if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "2" {
		t.Fatalf("a changed secret value rebuilt steps: %d\n%s", r.Code, r.Stderr)
	}
	if r = cli("build", "--no-cache", ctx); r.Code == 0 || !strings.Contains(r.Stderr, "--secret id=tok") {
		t.Fatalf("a remote build without its required secret: %d %s", r.Code, r.Stderr)
	}

	// A secrets part that is not base64: refused, the value not quoted.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, _ := mw.CreateFormField(api.BuildSecretsPart)
	_, _ = part.Write([]byte(`{"tok": "` + restSecret + `!"}`))
	_, _ = mw.CreateFormFile(api.BuildContextPart, "context.tar")
	_ = mw.Close()
	resp, err := p.Client(t).Do(context.Background(), http.MethodPost, "/v1/images/build", &body, mw.FormDataContentType())
	if err == nil {
		resp.Body.Close()
		t.Fatal("a secrets part that is not base64 was accepted")
	}
	if !strings.Contains(err.Error(), "base64") || strings.Contains(err.Error(), restSecret) {
		t.Fatalf("a bad secrets part: %v", err)
	}

	if strings.Contains(p.Log.String(), restSecret) {
		t.Errorf("the server's log holds the secret:\n%s", p.Log.String())
	}
	for _, dir := range []string{p.Root, p.RunRoot} {
		if out, _ := execOut("grep", "-rl", "--devices=skip", restSecret, dir); strings.TrimSpace(out) != "" {
			t.Errorf("the secret landed in the server's state: %s", out)
		}
	}

	// build prune over REST: the steps go; the next build does them again.
	if r = cli("build", "prune", "-f"); r.Code != 0 || !strings.Contains(r.Stdout, "removed 2 build steps") {
		t.Fatalf("remote build prune: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	if du, err := p.Client(t).DiskUsage(context.Background()); err != nil || du.BuildCacheImages != 0 {
		t.Fatalf("the server's disk usage after build prune: %+v %v", du, err)
	}
	r = cli("build", "-t", "remote/secret:2", "--secret", "id=tok,src="+secretFile, ctx)
	if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "0" {
		t.Fatalf("a remote build after prune should do every step: %d\n%s", r.Code, r.Stderr)
	}
	if list, err := p.Client(t).List(context.Background(), sbx.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("sandboxes left on the server after the builds: %v %+v", err, list)
	}
}

// remoteBuildServer starts sbx serve (with extra flags) for the test and
// pulls the busybox image into it from a registry on loopback as base;
// cli runs sbx --host against it.
func remoteBuildServer(t *testing.T, base string, extra ...string) (*harness.ServeProc, func(...string) harness.Result, string) {
	t.Helper()
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Extra = extra
	p.Start(t)
	t.Cleanup(func() { p.Stop(t) })
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	cli := func(args ...string) harness.Result {
		return harness.RunSbx(t, "", append([]string{"--host", "unix://" + p.Sock}, args...)...)
	}
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, base, fixture.BusyboxImage(t))
	if r := cli("pull", ref); r.Code != 0 {
		t.Fatalf("remote pull: %d %s", r.Code, r.Stderr)
	}
	return p, cli, ref
}
