package tests

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
)

// TestDialPortReachesTheSandboxLoopback: the host reaches a server bound to
// 127.0.0.1 inside a sandbox with no network (its own namespace), the way
// the Runtime API's data plane and readiness probe do; a stopped sandbox
// and a closed port are errors that say so.
func TestDialPortReachesTheSandboxLoopback(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	e := newServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := e.host.Create(ctx, sbx.Options{Rootfs: root, Name: "dialport"})
	if err != nil {
		t.Fatal(err)
	}
	e.see(sb.ID)
	ex := client.NewWithDialer(func(ctx context.Context) (net.Conn, error) { return e.host.Dial(ctx, sb.ID) }, client.Options{})
	defer ex.Close()
	if _, err := ex.StartService(ctx, execapi.ServiceSpec{Argv: []string{"sh", "-c", "mkdir -p /tmp/www && echo inside > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"}}); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, func() bool {
		c, err := e.host.DialPort(ctx, sb.ID, 8080)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		req, _ := http.NewRequest("GET", "http://sandbox/index.html", nil)
		if req.Write(c) != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		bufio.NewReader(resp.Body).WriteTo(b)
		body = b.String()
		return resp.StatusCode == 200
	})
	if body != "inside\n" {
		t.Fatalf("body %q", body)
	}
	if _, err := e.host.DialPort(ctx, sb.ID, 8081); err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
	if _, err := e.host.DialPort(ctx, sb.ID, 0); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("port 0: %v, want ErrInvalid", err)
	}
	if _, err := e.host.Stop(ctx, sb.ID, sbx.StopOptions{Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.host.DialPort(ctx, sb.ID, 8080); !errors.Is(err, sbx.ErrState) || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("dial into a stopped sandbox: %v", err)
	}
}
