package network

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
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestDialPortReachesTheSandboxLoopback: the host reaches a server bound to
// 127.0.0.1 inside a sandbox with no network (its own namespace), the way
// the Runtime API's data plane and readiness probe do, and so does a
// remote client through the server's tunnel; a stopped sandbox, a bad
// port and a closed port are errors that say so.
func TestDialPortReachesTheSandboxLoopback(t *testing.T) {
	root := fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := e.Host.Create(ctx, sbx.Options{Rootfs: root, Name: "dialport"})
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	ex := client.NewWithDialer(func(ctx context.Context) (net.Conn, error) { return e.Host.Dial(ctx, sb.ID) }, client.Options{})
	defer ex.Close()
	if _, err := ex.StartMainCmd(ctx, execapi.MainCmdSpec{Argv: []string{"sh", "-c", "mkdir -p /tmp/www && echo inside > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"}}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		name string
		be   sbx.Sandboxes
	}{{"host", e.Host}, {"remote", e.C}} {
		var body string
		harness.WaitFor(t, func() bool {
			c, err := b.be.DialPort(ctx, sb.ID, 8080)
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
			t.Fatalf("%s: body %q", b.name, body)
		}
		if _, err := b.be.DialPort(ctx, sb.ID, 8081); err == nil {
			t.Fatalf("%s: dial of a closed port succeeded", b.name)
		}
		if _, err := b.be.DialPort(ctx, sb.ID, 0); !errors.Is(err, sbx.ErrInvalid) {
			t.Fatalf("%s: port 0: %v, want ErrInvalid", b.name, err)
		}
		if _, err := b.be.DialPort(ctx, "no-such-sandbox", 8080); !errors.Is(err, sbx.ErrNotFound) {
			t.Fatalf("%s: unknown sandbox: %v, want ErrNotFound", b.name, err)
		}
	}
	// The server refuses a port that is not one before dialing anything.
	req, _ := http.NewRequest("GET", e.URL+"/v1/sandboxes/"+sb.ID+"/ports/99999/connect", nil)
	req.Header.Set("Authorization", "Bearer "+harness.ServerTestToken)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "sbx-port")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("port 99999 through the server: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := e.Host.Stop(ctx, sb.ID, sbx.StopOptions{Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for name, be := range map[string]sbx.Sandboxes{"host": e.Host, "remote": e.C} {
		if _, err := be.DialPort(ctx, sb.ID, 8080); !errors.Is(err, sbx.ErrState) || !strings.Contains(err.Error(), "stopped") {
			t.Fatalf("%s: dial into a stopped sandbox: %v", name, err)
		}
	}
}
