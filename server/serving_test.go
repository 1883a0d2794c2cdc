package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestListenConfig(t *testing.T) {
	for _, tc := range []struct {
		c    ListenConfig
		want string
	}{
		{ListenConfig{TCP: "127.0.0.1:0"}, "needs a token"},
		{ListenConfig{TCP: "127.0.0.1:0", InsecureNoAuth: true, TLSCert: "c"}, "both --tls-cert and --tls-key"},
		{ListenConfig{TLSCert: "c", TLSKey: "k"}, "add --listen"},
		{ListenConfig{TCP: "127.0.0.1:0", Token: "t"}, ""},
	} {
		err := tc.c.Check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	sock := filepath.Join(t.TempDir(), "sbx.sock")
	c := ListenConfig{TCP: "127.0.0.1:0", DefaultUnix: sock, Token: "t"}
	ls, closeAll, err := c.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Addr().Network() != "tcp" {
		t.Errorf("TCP only: a default socket is for a server without --listen: %v", ls)
	}
	if u := URL(ls[0], true); !strings.HasPrefix(u, "https://127.0.0.1:") {
		t.Errorf("URL: %q", u)
	}
	closeAll()
	c = ListenConfig{DefaultUnix: sock}
	if ls, closeAll, err = c.Listen(); err != nil || len(ls) != 1 || URL(ls[0], false) != "unix://"+sock {
		t.Fatalf("default socket: %v %v", ls, err)
	}
	closeAll()
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after close: %v", err)
	}
	if _, _, err := (&ListenConfig{TCP: "127.0.0.1:0", Unix: filepath.Join(t.TempDir(), "f")}).Listen(); err != nil {
		t.Fatal(err)
	}
}

// companion is an API that fails at once or serves until ctx ends.
type companion struct {
	fail   bool
	served chan struct{}
}

func (c *companion) Addr() net.Addr { return &net.TCPAddr{} }
func (c *companion) Serve(ctx context.Context, grace time.Duration) error {
	defer close(c.served)
	if c.fail {
		return errors.New("broken")
	}
	<-ctx.Done()
	return nil
}

// TestServeWithStopsTogether checks that a failing companion stops the
// REST API and the other companions.
func TestServeWithStopsTogether(t *testing.T) {
	srv, _ := newTestServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ok, bad := &companion{served: make(chan struct{})}, &companion{fail: true, served: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- srv.ServeWith(context.Background(), []net.Listener{ln}, time.Second, ok, bad) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeWith: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a failed companion did not stop the server")
	}
	<-ok.served
}

func TestParseSizes(t *testing.T) {
	var c Config
	if err := c.ParseSizes("1m", "1g", "2k"); err != nil || c.MaxBodyBytes != 1<<20 || c.MaxUploadBytes != 1<<30 || c.MaxReplyBytes != 2<<10 {
		t.Errorf("sizes: %+v %v", c, err)
	}
	if err := c.ParseSizes("1m", "lots", "1m"); err == nil || !strings.Contains(err.Error(), "invalid --max-upload-size") {
		t.Errorf("bad upload size: %v", err)
	}
}
