package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

// bootServer is a main command that serves /tmp/www on port 8080 after a
// moment, its ready page naming the member's key ($KEY) and the create's
// variable $WHO.
var bootServer = []string{"sh", "-c", `mkdir -p /tmp/www && echo "dormant key=$KEY who=$WHO" > /tmp/www/ready && sleep 0.3 && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www`}

// getPort GETs path on port 8080 of sandbox id through DialPort.
func getPort(ctx context.Context, h *Host, id, path string) (int, string, error) {
	conn, err := h.DialPort(ctx, id, 8080)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// TestPoolBootedMember: a pool with a main command boots it in every
// member with a key of the member's own and lists the member only once its
// ready check passes; Claim hands the hook the member with its command
// running and the key; a member whose hook fails is removed and the next
// Claim gets another; a create of another command starts cold; the stats
// count hits, misses and boots.
func TestPoolBootedMember(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	o.Cmd, o.Env, o.Workdir, o.User = bootServer, []string{"WHO=pool"}, "/srv/app", "1000:1000"
	spec := sbx.PoolSpec{Name: "srv", Size: 2, Options: o, KeyEnv: []string{"KEY"},
		ReadyCheck: &sbx.ReadyCheck{Port: 8080, Path: "/ready", Body: "dormant"}}
	if _, err := h.CreatePool(ctx, spec); err != nil {
		t.Fatal(err)
	}
	rep, err := h.FillPool(ctx, "srv")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range rep.Started {
		markSeen(h, id)
	}
	if len(rep.Started) != 2 {
		t.Fatalf("fill started %v", rep.Started)
	}
	st := h.PoolStats()["srv"]
	if st.Boots != 2 || st.BootSeconds < 0.3 || st.LastBootS < 0.3 {
		t.Fatalf("boot stats after fill: %+v", st)
	}

	// The hook sees the command answering with the member's own key.
	keys := map[string]bool{}
	claim := o
	claim.Name, claim.Labels = "first", map[string]string{"who": "first"}
	var seenKey string
	sb, err := h.Claim(ctx, claim, func(ctx context.Context, m *PoolMember) error {
		if m.Sandbox.Status != sbx.StatusRunning || m.Sandbox.FromPool != "srv" || m.Sandbox.Name != "first" {
			return fmt.Errorf("hook got %+v", m.Sandbox)
		}
		code, body, err := getPort(ctx, h, m.Sandbox.ID, "/ready")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /ready: %d %v", code, err)
		}
		if len(m.Key) != 64 || !strings.Contains(body, "key="+m.Key+" ") || !strings.Contains(body, "who=pool") {
			return fmt.Errorf("key %q, page %q", m.Key, body)
		}
		seenKey = m.Key
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	keys[seenKey] = true
	if sb.Cmd == nil || sb.Cmd.Status != "running" || sb.Options.Labels["who"] != "first" {
		t.Fatalf("claimed: cmd %+v labels %v", sb.Cmd, sb.Options.Labels)
	}
	if got := execOut(t, h, sb.ID, "pwd"); got != "/srv/app" {
		t.Fatalf("workdir of later commands: %q", got)
	}
	// The start made the working directory; the command's user owns it.
	if got := execOut(t, h, sb.ID, "stat", "-c", "%u:%g", "/srv/app"); got != "1000:1000" {
		t.Fatalf("owner of the working directory: %q", got)
	}

	// A failing hook: the member goes, the caller gets the hook's error.
	claim.Name = "second"
	var failed string
	errHook := errors.New("the server refused its session")
	_, err = h.Claim(ctx, claim, func(ctx context.Context, m *PoolMember) error {
		failed = m.Sandbox.ID
		if keys[m.Key] || m.Key == "" {
			t.Errorf("two members share key %q", m.Key)
		}
		return errHook
	})
	if !errors.Is(err, errHook) {
		t.Fatalf("claim with a failing hook: %v", err)
	}
	if _, err := h.Get(ctx, failed); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("member whose hook failed: %v", err)
	}
	if _, err := h.Get(ctx, "second"); !errors.Is(err, sbx.ErrNotFound) {
		t.Fatalf("the failed claim's name is still taken: %v", err)
	}
	// None left: Claim starts nothing cold.
	if _, err := h.Claim(ctx, claim, nil); !errors.Is(err, ErrNoMember) {
		t.Fatalf("claim of an empty pool: %v", err)
	}
	// Another command does not match the booted members.
	if _, err := h.FillPool(ctx, "srv"); err != nil {
		t.Fatal(err)
	}
	other := o
	other.Cmd = []string{"sleep", "1000"}
	cold, err := h.Create(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	markSeen(h, cold.ID)
	if cold.FromPool != "" {
		t.Fatalf("a create of another command claimed from %q", cold.FromPool)
	}
	// Nor does another environment.
	envd := o
	envd.Env = []string{"WHO=someone-else"}
	if _, err := h.Claim(ctx, envd, nil); !errors.Is(err, ErrNoMember) {
		t.Fatalf("claim with another environment: %v", err)
	}
	st = h.PoolStats()["srv"]
	if st.Hits != 2 || st.HookFailures != 1 || st.Misses < 1 || st.Boots != 4 {
		t.Fatalf("stats: %+v", st)
	}
	// A member whose command died is replaced by the next fill.
	st = h.PoolStats()["srv"]
	p, err := h.GetPool(ctx, "srv")
	if err != nil || len(p.Ready) != 2 {
		t.Fatalf("pool before the kill: %+v %v", p, err)
	}
	var dead sbx.Sandbox
	if err := h.store.Read(p.Ready[0], &dead); err != nil {
		t.Fatal(err)
	}
	c, _ := h.executor(&dead)
	if _, err := c.StopMainCmd(ctx, "SIGKILL", time.Second); err != nil {
		t.Fatal(err)
	}
	c.Close()
	rep, err = h.FillPool(ctx, "srv")
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0] != dead.ID || len(rep.Started) != 1 {
		t.Fatalf("fill after a member's command died: %+v %v", rep, err)
	}
	markSeen(h, rep.Started[0])
	if got := h.PoolStats()["srv"].Boots; got != st.Boots+1 {
		t.Fatalf("boots after the refill: %d, want %d", got, st.Boots+1)
	}
	for _, id := range []string{sb.ID, cold.ID} {
		if err := h.Remove(ctx, id, sbx.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPoolBootRefused: a member whose ready check is refused (a 4xx) is
// removed by the fill, which fails saying why; nothing is left.
func TestPoolBootRefused(t *testing.T) {
	h := newHost(t, HostConfig{})
	ctx := context.Background()
	o := busybox(t)
	o.Cmd = bootServer
	if _, err := h.CreatePool(ctx, sbx.PoolSpec{Name: "refused", Size: 1, Options: o,
		ReadyCheck: &sbx.ReadyCheck{Port: 8080, Path: "/missing"}}); err != nil {
		t.Fatal(err)
	}
	_, err := h.FillPool(ctx, "refused")
	if err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("fill with a refused ready check: %v", err)
	}
	list, err := h.List(ctx, sbx.Filter{Pooled: true})
	if err != nil || len(list) != 0 {
		t.Fatalf("left after a refused boot: %v %v", list, err)
	}
	if st := h.PoolStats()["refused"]; st.BootFailures != 1 || !strings.Contains(st.LastError, "404") {
		t.Fatalf("stats: %+v", st)
	}
	// A key and a ready check need a main command.
	bad := sbx.PoolSpec{Name: "bad", Size: 1, Options: busybox(t), KeyEnv: []string{"KEY"}}
	if _, err := h.CreatePool(ctx, bad); !errors.Is(err, sbx.ErrInvalid) {
		t.Fatalf("key_env without cmd: %v", err)
	}
}
