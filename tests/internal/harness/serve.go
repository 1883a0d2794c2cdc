package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
)

// ServeProc is `sbx serve` running as its own process.
type ServeProc struct {
	Dir, Root, RunRoot, Sock, tokenFile string
	Cmd                                 *exec.Cmd
	Log                                 *bytes.Buffer
	Extra                               []string // more serve flags
}

// NewServeDirs makes the state, runtime and socket directories of an sbx
// serve process for the test, and its token file; Start runs it.
func NewServeDirs(t *testing.T) *ServeProc {
	dir, err := os.MkdirTemp("", "sbxp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// Private user namespaces (the default) need the run root reachable.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	p := &ServeProc{Dir: dir, Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"),
		Sock: filepath.Join(dir, "sbx.sock"), tokenFile: filepath.Join(dir, "token")}
	if err := os.WriteFile(p.tokenFile, []byte(ServerTestToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Args is the sbx serve command line over p's directories, with extra
// flags appended.
func (p *ServeProc) Args(extra ...string) []string {
	args := append([]string{"--root", p.Root, "--run-root", p.RunRoot, "--log-level", "info", "serve",
		"--unix", p.Sock, "--token-file", p.tokenFile,
		"--allow-host-dir", fixture.CacheDir, "--watch-interval", "200ms"}, ExecutorBinaryFlag()...)
	return append(args, extra...)
}

// Start runs the server and waits until it answers.
func (p *ServeProc) Start(t *testing.T) {
	t.Helper()
	p.Log = &bytes.Buffer{}
	p.Cmd = exec.Command(SbxBin, p.Args(p.Extra...)...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Log, p.Log
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := p.Client(t)
	for deadline := time.Now().Add(20 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			_ = p.Cmd.Process.Kill()
			t.Fatalf("sbx serve did not answer within 20s: %v\n%s", err, p.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop sends SIGTERM and checks the server exits cleanly and promptly.
func (p *ServeProc) Stop(t *testing.T) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sbx serve after SIGTERM: %v\n%s", err, p.Log)
		}
	case <-time.After(40 * time.Second):
		_ = p.Cmd.Process.Kill()
		t.Fatalf("sbx serve did not stop within 40s of SIGTERM\n%s", p.Log)
	}
	if _, err := os.Stat(p.Sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket %s is left after a graceful stop", p.Sock)
	}
}

// Client is a REST client of the server on p's socket, with the test token.
func (p *ServeProc) Client(t *testing.T) *client.Client {
	c, err := client.New("unix://"+p.Sock, client.Options{Token: ServerTestToken, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
