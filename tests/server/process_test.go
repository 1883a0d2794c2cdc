package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// stateIDs lists the sandbox records under the root.
func stateIDs(p *harness.ServeProc) []string {
	entries, _ := os.ReadDir(filepath.Join(p.Root, "sandboxes"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// assertNoSandboxProcesses fails if a process lives in a cgroup of ids.
// Zombies are given time: the PID 1 of a sandbox whose server was killed
// is reparented to the host's init, which reaps it when it gets to it.
func assertNoSandboxProcesses(t *testing.T, ids []string) {
	t.Helper()
	var live []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		live = live[:0]
		files, _ := filepath.Glob("/proc/[0-9]*/cgroup")
		for _, f := range files {
			data, _ := os.ReadFile(f)
			for _, id := range ids {
				if strings.Contains(string(data), id) {
					stat, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "stat"))
					live = append(live, fmt.Sprintf("%s in sandbox %s: %.80s", filepath.Dir(f), id, stat))
				}
			}
		}
		if len(live) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, l := range live {
		t.Errorf("leak: process %s", l)
	}
}

// TestServerKill9Restart kills the server with SIGKILL while 8 clients
// create, exec in and delete sandboxes, restarts it, and checks every
// sandbox left is usable and that removing them leaks nothing.
func TestServerKill9Restart(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = p.Cmd.Process.Kill()
			_ = p.Cmd.Wait()
		}
	})
	c := p.Client(t)
	// Two sandboxes live across the kill, with files written before it.
	var keep []string
	for i := range 2 {
		sb, err := c.Create(context.Background(), harness.BusyboxCreate(fmt.Sprintf("keep%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(context.Background(), "PUT", client.SandboxPath(sb.ID, "/files?path=/tmp/before"), strings.NewReader("written before the kill"), "application/octet-stream")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		keep = append(keep, sb.ID)
	}
	var (
		mu      sync.Mutex
		created = map[string]bool{}
		done    atomic.Int64
		stopped atomic.Bool
	)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; i < 200 && !stopped.Load(); i++ {
				sb, err := c.Create(ctx, harness.BusyboxCreate(""))
				if err != nil {
					return // the server was killed
				}
				mu.Lock()
				created[sb.ID] = true
				mu.Unlock()
				var res execResult
				if err := c.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"argv": []string{"echo", fmt.Sprint(w, i)}}, &res); err != nil {
					return
				}
				if res.Stdout != fmt.Sprintln(w, i) {
					t.Errorf("worker %d: exec said %q", w, res.Stdout)
				}
				if err := c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
					return
				}
				done.Add(1)
			}
		}()
	}
	// Kill once every worker is well into its loop.
	for deadline := time.Now().Add(60 * time.Second); done.Load() < 16 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.Cmd.Wait()
	killed = true
	stopped.Store(true)
	wg.Wait()
	left := stateIDs(p)
	t.Logf("killed after %d create/exec/delete rounds; %d sandboxes on disk", done.Load(), len(left))
	mu.Lock()
	for _, id := range left {
		created[id] = true
	}
	mu.Unlock()

	// Restart: the server re-adopts what runs and undoes what was cut.
	p.Start(t)
	killed = false
	ctx := context.Background()
	list, err := c.List(ctx, sbx.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list {
		if sb.Status != "running" {
			t.Errorf("sandbox %s is %s after the restart, want running (interrupted creates are undone)", sb.ID, sb.Status)
			continue
		}
		var res execResult
		if err := c.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"argv": []string{"echo", "still here"}}, &res); err != nil || res.Stdout != "still here\n" {
			t.Errorf("sandbox %s after the restart: %+v %v", sb.ID, res, err)
		}
	}
	running := map[string]bool{}
	for _, sb := range list {
		running[sb.ID] = sb.Status == "running"
	}
	for _, id := range keep {
		if !running[id] {
			t.Fatalf("sandbox %s, running before the kill, is not running after the restart", id)
		}
		resp, err := c.Do(ctx, "GET", client.SandboxPath(id, "/files?path=/tmp/before"), nil, "")
		if err != nil {
			t.Fatalf("read a file written before the kill: %v", err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(data) != "written before the kill" {
			t.Fatalf("file written before the kill: %q", data)
		}
	}
	t.Logf("%d sandboxes re-adopted and usable", len(list))
	// The restarted server works as before.
	sb, err := c.Create(ctx, harness.BusyboxCreate(""))
	if err != nil {
		t.Fatal(err)
	}
	created[sb.ID] = true
	list, _ = c.List(ctx, sbx.Filter{})
	for _, sb := range list {
		if err := c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove %s: %v", sb.ID, err)
		}
	}
	p.Stop(t)
	killed = true
	var ids []string
	for id := range created {
		ids = append(ids, id)
	}
	harness.ServerAssertNoLeaks(t, p.RunRoot, p.Root, ids)
	assertNoSandboxProcesses(t, ids)
}

// TestServerGracefulStopKeepsSandboxes stops the server with SIGTERM while
// an event stream is open and a sandbox runs: the server exits at once and
// the next one finds the sandbox running.
func TestServerGracefulStopKeepsSandboxes(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	c := p.Client(t)
	ctx := context.Background()
	sb, err := c.Create(ctx, harness.BusyboxCreate("keep"))
	if err != nil {
		t.Fatal(err)
	}
	streamDone := make(chan error, 1)
	go func() { streamDone <- c.Events(ctx, 0, func(api.Event) error { return nil }) }()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	p.Stop(t)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("graceful stop with an open event stream took %v", d)
	}
	select {
	case <-streamDone:
	case <-time.After(5 * time.Second):
		t.Error("the event stream was not closed by the shutdown")
	}
	p.Start(t)
	defer p.Stop(t)
	var res execResult
	if err := c.Call(ctx, "POST", client.SandboxPath("keep", "/exec"), map[string]any{"argv": []string{"echo", "kept"}}, &res); err != nil || res.Stdout != "kept\n" {
		t.Fatalf("sandbox after a graceful restart: %+v %v", res, err)
	}
	if err := c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}

// TestServerListeners checks the listener rules: a TCP listener needs a
// token or --insecure-no-auth; the unix socket is mode 0600.
func TestServerListeners(t *testing.T) {
	p := harness.NewServeDirs(t)
	r := harness.RunSbx(t, "", "--root", p.Root, "--run-root", p.RunRoot, "serve", "--listen", "127.0.0.1:0")
	if r.Code == 0 || !strings.Contains(r.Stderr, "--insecure-no-auth") {
		t.Fatalf("TCP without a token: exit %d, %s", r.Code, r.Stderr)
	}
	short := filepath.Join(p.Dir, "short")
	_ = os.WriteFile(short, []byte("abc\n"), 0o600)
	r = harness.RunSbx(t, "", "--root", p.Root, "--run-root", p.RunRoot, "serve", "--listen", "127.0.0.1:0", "--token-file", short)
	if r.Code == 0 || !strings.Contains(r.Stderr, "at least 16") {
		t.Fatalf("short token: exit %d, %s", r.Code, r.Stderr)
	}
	p.Start(t)
	defer p.Stop(t)
	fi, err := os.Stat(p.Sock)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	// A second server on the same socket refuses to start.
	r = harness.RunSbx(t, "", p.Args()...)
	if r.Code == 0 || !strings.Contains(r.Stderr, "another server") {
		t.Fatalf("second server: exit %d, %s", r.Code, r.Stderr)
	}
	// The unix socket also needs the token when one is configured.
	bad, _ := client.New("unix://"+p.Sock, client.Options{Token: "wrong-token-wrong-token"})
	if _, err := bad.List(context.Background(), sbx.Filter{}); client.StatusOf(err) != http.StatusUnauthorized {
		t.Fatalf("wrong token on the socket: %v", err)
	}
	// --insecure-no-auth serves TCP without a token.
	cmd, addr, _ := startServeTCP(t, append([]string{"--root", p.Root, "--run-root", p.RunRoot, "--log-level", "info", "serve", "--listen", "127.0.0.1:0", "--insecure-no-auth"}, harness.ExecutorBinaryFlag()...))
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	c, _ := client.New(addr, client.Options{})
	var err2 error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err2 = c.List(context.Background(), sbx.Filter{}); err2 == nil {
			break
		}
	}
	if err2 != nil {
		t.Fatalf("--insecure-no-auth: %v", err2)
	}
}

// TestServerRemoteCLI runs the sandbox commands of the CLI against a
// server with --host.
func TestServerRemoteCLI(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	p.Start(t)
	defer p.Stop(t)
	host := "unix://" + p.Sock
	t.Setenv("SBX_TOKEN", harness.ServerTestToken)
	// The local state is elsewhere: the commands must act on the server.
	local := t.TempDir()
	sbx := func(args ...string) harness.Result {
		return harness.RunSbx(t, "", append([]string{"--root", local + "/root", "--run-root", local + "/run", "--host", host}, args...)...)
	}
	r := sbx("create", "--rootfs", fixture.CacheDir+"/busybox", "--name", "remote1", "--label", "via=cli", "--memory", "64m")
	if r.Code != 0 {
		t.Fatalf("remote create: %d %s", r.Code, r.Stderr)
	}
	id := strings.TrimSpace(r.Stdout)
	r = sbx("ps", "--format", "json", "--filter", "label=via=cli")
	var list []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &list) != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("remote ps: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = sbx("ps", "-q"); r.Code != 0 || !strings.Contains(r.Stdout, id[:12]) {
		t.Fatalf("remote ps -q: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = sbx("inspect", "remote1"); r.Code != 0 || !strings.Contains(r.Stdout, id) {
		t.Fatalf("remote inspect: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("stats", "--no-stream", "--format", "json", "remote1"); r.Code != 0 || !strings.Contains(r.Stdout, `"memory_limit_bytes":67108864`) {
		t.Fatalf("remote stats: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	// exec streams and propagates the exit code; cp goes both ways.
	if r = sbx("exec", "remote1", "--", "sh", "-c", "echo out; echo err >&2; exit 7"); r.Code != 7 || r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Fatalf("remote exec: %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r = sbx("exec", "nosuch", "--", "true"); r.Code != 1 {
		t.Fatalf("remote exec in no sandbox: exit %d, want 1 (%s)", r.Code, r.Stderr)
	}
	if r = sbx("exec", "-t", "remote1", "--", "sh", "-c", "exit 4"); r.Code != 4 {
		t.Fatalf("remote exec -t: %d %s", r.Code, r.Stderr)
	}
	hostDir := t.TempDir()
	_ = os.WriteFile(filepath.Join(hostDir, "in.txt"), []byte("to the sandbox\n"), 0o644)
	if r = sbx("cp", filepath.Join(hostDir, "in.txt"), "remote1:/tmp/in.txt"); r.Code != 0 {
		t.Fatalf("remote cp to: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("cp", "remote1:/tmp/in.txt", filepath.Join(hostDir, "back.txt")); r.Code != 0 {
		t.Fatalf("remote cp from: %d %s", r.Code, r.Stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(hostDir, "back.txt")); string(data) != "to the sandbox\n" {
		t.Fatalf("cp round trip: %q", data)
	}
	for _, args := range [][]string{{"pause", "remote1"}, {"resume", "remote1"}, {"stop", "-t", "1s", "remote1"}, {"start", "remote1"}} {
		if r = sbx(args...); r.Code != 0 {
			t.Fatalf("remote %v: %d %s", args, r.Code, r.Stderr)
		}
	}
	if r = sbx("rm", "remote1"); r.Code != 1 {
		t.Fatalf("remote rm of a running sandbox without -f: exit %d, want 1 (%s)", r.Code, r.Stderr)
	}
	if r = sbx("rm", "-f", "remote1"); r.Code != 0 {
		t.Fatalf("remote rm -f: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("inspect", "remote1"); r.Code != 1 {
		t.Fatalf("remote inspect after rm: exit %d, want 1", r.Code)
	}
	// Images on the server: pull with progress, list, remove.
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "remote/busybox:1", fixture.BusyboxImage(t))
	if r = sbx("pull", ref); r.Code != 0 || !strings.Contains(r.Stdout, "sha256:") {
		t.Fatalf("remote pull: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = sbx("images", "--format", "json"); r.Code != 0 || !strings.Contains(r.Stdout, "remote/busybox:1") {
		t.Fatalf("remote images: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = harness.RunSbx(t, "", "--root", local+"/root", "--run-root", local+"/run", "images", "-q"); r.Code != 0 || r.Stdout != "" {
		t.Fatalf("the remote pull landed in the local cache: %q %s", r.Stdout, r.Stderr)
	}
	// commit: a sandbox's writable layer becomes a new image on the server.
	if r = sbx("create", "--name", "base", ref); r.Code != 0 {
		t.Fatalf("remote create from an image: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("exec", "base", "--", "sh", "-c", "echo committed > /marker"); r.Code != 0 {
		t.Fatalf("remote exec: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("commit", "base", "remote/committed:1"); r.Code != 0 || !strings.Contains(r.Stdout, "sha256:") {
		t.Fatalf("remote commit: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = sbx("commit", "nosuch", "remote/x:1"); r.Code != 1 {
		t.Fatalf("remote commit of no sandbox: exit %d, want 1 (%s)", r.Code, r.Stderr)
	}
	if r = sbx("run", "remote/committed:1", "cat", "/marker"); r.Code != 0 || r.Stdout != "committed\n" {
		t.Fatalf("run of the committed image: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	for _, args := range [][]string{{"rm", "-f", "base"}, {"rmi", "remote/committed:1"}} {
		if r = sbx(args...); r.Code != 0 {
			t.Fatalf("remote %v: %d %s", args, r.Code, r.Stderr)
		}
	}
	if r = sbx("rmi", ref); r.Code != 0 {
		t.Fatalf("remote rmi: %d %s", r.Code, r.Stderr)
	}
	if r = sbx("rmi", ref); r.Code == 0 {
		t.Fatal("remote rmi of a removed image succeeded")
	}
	// info and gc act on the server's host.
	r = sbx("info", "--format", "json")
	var info api.HostInfo
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &info) != nil || info.Root != p.Root || info.RunRoot != p.RunRoot || info.CgroupMode == "" || info.Kernel == "" || len(info.Uses) == 0 {
		t.Fatalf("remote info: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = sbx("info"); r.Code != 0 || !strings.Contains(r.Stdout, "root:         "+p.Root) {
		t.Fatalf("remote info (text): %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	// A sandbox whose TTL passed is reaped by the server's gc (its own
	// reaper may get there first: then gc finds nothing, and the sandbox
	// is gone either way).
	if r = sbx("create", "--rootfs", fixture.CacheDir+"/busybox", "--name", "short", "--ttl", "1s"); r.Code != 0 {
		t.Fatalf("remote create --ttl: %d %s", r.Code, r.Stderr)
	}
	shortID := strings.TrimSpace(r.Stdout)
	time.Sleep(1100 * time.Millisecond)
	if r = sbx("gc"); r.Code != 0 || (r.Stdout != "" && r.Stdout != "removed expired "+shortID+"\n") {
		t.Fatalf("remote gc: %d %q %s", r.Code, r.Stdout, r.Stderr)
	}
	if r = sbx("inspect", "short"); r.Code != 1 {
		t.Fatalf("remote inspect after the TTL and gc: exit %d, want 1", r.Code)
	}
	// Commands that act on this host only refuse --host.
	if r = sbx("bench"); r.Code == 0 || !strings.Contains(r.Stderr, "this host only") {
		t.Fatalf("bench with --host: %d %s", r.Code, r.Stderr)
	}
	t.Setenv("SBX_TOKEN", "wrong-token-wrong-token")
	if r = sbx("ps"); r.Code == 0 || !strings.Contains(r.Stderr, "unauthorized") {
		t.Fatalf("remote ps with a wrong token: %d %s", r.Code, r.Stderr)
	}
	if entries, _ := os.ReadDir(local); len(entries) > 0 {
		t.Logf("local state dirs created: %d (only directories; no sandbox)", len(entries))
	}
}

// TestServerTLS serves the API over TLS with a token and reaches it, and
// a sandbox's executor through a tunnel, with the Go client.
func TestServerTLS(t *testing.T) {
	fixture.BusyboxRootfs(t)
	p := harness.NewServeDirs(t)
	certPEM, keyPEM := selfSignedCert(t)
	certFile, keyFile := filepath.Join(p.Dir, "cert.pem"), filepath.Join(p.Dir, "key.pem")
	_ = os.WriteFile(certFile, certPEM, 0o600)
	_ = os.WriteFile(keyFile, keyPEM, 0o600)
	cmd, addr, log := startServeTCP(t, append(p.Args(), "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile))
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	c, err := client.New("https://"+addr, client.Options{Token: harness.ServerTestToken, TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err = c.List(ctx, sbx.Filter{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS server: %v\n%s", err, log())
		}
	}
	sb, err := c.Create(ctx, harness.BusyboxCreate(""))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}) }()
	res, err := c.Executor(sb.ID, execclient.Options{}).Exec(ctx, execapi.ExecRequest{Argv: []string{"echo", "tls"}})
	if err != nil || res.Stdout != "tls\n" {
		t.Fatalf("exec through a TLS tunnel: %+v %v", res, err)
	}
	// Plain HTTP to the TLS port fails; a client that does not trust the
	// certificate fails.
	if plain, _ := client.New("http://"+addr, client.Options{Token: harness.ServerTestToken}); plain != nil {
		if _, err := plain.List(ctx, sbx.Filter{}); err == nil {
			t.Fatal("plain HTTP to the TLS listener succeeded")
		}
	}
	untrusting, _ := client.New("https://"+addr, client.Options{Token: harness.ServerTestToken})
	if _, err := untrusting.List(ctx, sbx.Filter{}); err == nil {
		t.Fatal("a client without the CA trusted the server")
	}
	if err := c.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}

// startServeTCP starts `sbx ARGS` (a serve with --listen 127.0.0.1:0 and
// --log-level info) and returns it with the address it listens on, read
// from its log: a port of its own, never one another test run may hold.
// logs returns what it logged so far.
func startServeTCP(t *testing.T, args []string) (cmd *exec.Cmd, addr string, logs func() string) {
	t.Helper()
	cmd = exec.Command(harness.SbxBin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var buf strings.Builder
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			buf.WriteString(line + "\n")
			mu.Unlock()
			if _, rest, ok := strings.Cut(line, "sbx serve: listening"); ok {
				if _, a, ok := strings.Cut(rest, "addr="); ok && strings.HasPrefix(a, "127.0.0.1:") {
					select {
					case found <- strings.Fields(a)[0]:
					default:
					}
				}
			}
		}
	}()
	logs = func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	select {
	case addr = <-found:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("sbx serve did not say where it listens within 20s:\n%s", logs())
	}
	return cmd, addr, logs
}

// selfSignedCert makes a certificate for 127.0.0.1.
func selfSignedCert(t *testing.T) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sbx test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
