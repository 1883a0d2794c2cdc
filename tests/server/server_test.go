package server

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

type execResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// TestServerSandboxRoutes drives every sandbox and executor route through
// the Go client and through raw HTTP against real sandboxes.
func TestServerSandboxRoutes(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	c := e.C

	// Create through the client, with limits as strings and a ttl.
	req := harness.BusyboxCreate("srv-a")
	req.Labels = map[string]string{"team": "a"}
	req.Limits = sbx.Limits{MemoryBytes: 64 << 20, Pids: 128, DiskBytes: 32 << 20}
	sbA, err := c.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sbA.ID)
	if sbA.Status != "running" || sbA.ID == "" || sbA.Name != "srv-a" {
		t.Fatalf("created: %+v", sbA)
	}
	// Create through raw HTTP.
	data := harness.MustRaw(t, e, 201, "POST", "/v1/sandboxes", api.ContentTypeJSON,
		[]byte(`{"rootfs":"`+fixture.CacheDir+`/busybox","name":"srv-b","labels":{"team":"b"},"limits":{"memory_bytes":"48m","disk_bytes":"16m"},"ttl":"1h"}`))
	sbB := harness.DecodeJSON[api.Sandbox](t, data)
	e.See(sbB.ID)
	if sbB.ExpiresAt == nil || sbB.Options.Limits.MemoryBytes != 48<<20 || !strings.Contains(string(data), `"memory_bytes":50331648`) || !strings.Contains(string(data), `"ttl":"1h0m0s"`) {
		t.Fatalf("raw create: %s", data)
	}
	// A name in use is a conflict.
	if _, err := c.Create(ctx, harness.BusyboxCreate("srv-a")); client.StatusOf(err) != http.StatusConflict {
		t.Fatalf("duplicate name: %v", err)
	}

	// List, filtered by label, both ways.
	list, err := c.List(ctx, sbx.Filter{Labels: map[string]string{"team": "a"}})
	if err != nil || len(list) != 1 || list[0].ID != sbA.ID {
		t.Fatalf("list team=a: %+v %v", list, err)
	}
	raw := harness.DecodeJSON[api.SandboxList](t, harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes?label=team=b", "", nil))
	if len(raw.Sandboxes) != 1 || raw.Sandboxes[0].ID != sbB.ID {
		t.Fatalf("raw list team=b: %+v", raw)
	}
	if all, _ := c.List(ctx, sbx.Filter{}); len(all) != 2 {
		t.Fatalf("list all: %d", len(all))
	}
	// Get by id, prefix and name.
	for _, ref := range []string{sbA.ID, sbA.ID[:10], "srv-a"} {
		got, err := c.Get(ctx, ref)
		if err != nil || got.ID != sbA.ID {
			t.Fatalf("get %s: %v", ref, err)
		}
	}
	harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/srv-b", "", nil)

	// Exec: client, raw, and streamed.
	var res execResult
	if err := c.Call(ctx, "POST", client.SandboxPath("srv-a", "/exec"), map[string]any{"argv": []string{"sh", "-c", "echo out; echo err >&2; exit 3"}}, &res); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Fatalf("exec: %+v", res)
	}
	res = harness.DecodeJSON[execResult](t, harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbB.ID+"/exec", api.ContentTypeJSON, []byte(`{"command":"hostname; cat /proc/1/cmdline | tr '\\0' ' '"}`)))
	if !strings.Contains(res.Stdout, "executor") {
		t.Fatalf("raw exec: %+v", res)
	}
	var frames []string
	start := time.Now()
	var firstAt time.Duration
	err = c.Stream(ctx, "POST", client.SandboxPath(sbA.ID, "/exec?stream=1"), map[string]any{"command": "echo one; sleep 1; echo two"}, 1<<20, func(line []byte) error {
		if firstAt == 0 {
			firstAt = time.Since(start)
		}
		frames = append(frames, string(line))
		return nil
	})
	if err != nil || len(frames) != 3 || !strings.Contains(frames[0], `"one\n"`) || !strings.Contains(frames[2], `"result"`) {
		t.Fatalf("streamed exec: %v %q", err, frames)
	}
	if firstAt > 900*time.Millisecond {
		t.Fatalf("the first frame arrived after %v: the proxy does not flush as output comes", firstAt)
	}

	// Shell sessions.
	var sess struct {
		ID string `json:"id"`
	}
	if err := c.Call(ctx, "POST", client.SandboxPath(sbA.ID, "/sessions"), map[string]any{"cwd": "/tmp"}, &sess); err != nil || sess.ID == "" {
		t.Fatalf("create session: %v", err)
	}
	var run struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
		Output   string `json:"output"`
		Cwd      string `json:"cwd"`
	}
	if err := c.Call(ctx, "POST", client.SandboxPath(sbA.ID, "/sessions/"+sess.ID+"/run"), map[string]any{"command": "cd /etc && X=42"}, &run); err != nil || run.Status != "completed" {
		t.Fatalf("session run: %+v %v", run, err)
	}
	run = harness.DecodeJSON[struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
		Output   string `json:"output"`
		Cwd      string `json:"cwd"`
	}](t, harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbA.ID+"/sessions/"+sess.ID+"/run", api.ContentTypeJSON, []byte(`{"command":"echo $X $(pwd)"}`)))
	if run.Output != "42 /etc\n" || run.Cwd != "/etc" {
		t.Fatalf("session state not kept: %+v", run)
	}
	sessions := harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/"+sbA.ID+"/sessions", "", nil)
	if !strings.Contains(string(sessions), sess.ID) {
		t.Fatalf("session list: %s", sessions)
	}
	if err := c.Call(ctx, "DELETE", client.SandboxPath(sbA.ID, "/sessions/"+sess.ID), nil, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := harness.RawCall(t, e, "DELETE", "/v1/sandboxes/"+sbA.ID+"/sessions/"+sess.ID, "", nil); st != 404 {
		t.Fatalf("delete of a deleted session: %d", st)
	}

	// Files: write, read, edit, list; both ways.
	resp, err := c.Do(ctx, "PUT", client.SandboxPath(sbA.ID, "/files?path=/tmp/dir/hello.txt"), strings.NewReader("hello\nworld\n"), "application/octet-stream")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/"+sbA.ID+"/files?path=/tmp/dir/hello.txt", "", nil); string(got) != "hello\nworld\n" {
		t.Fatalf("read back: %q", got)
	}
	harness.MustRaw(t, e, 200, "PUT", "/v1/sandboxes/"+sbA.ID+"/files?path=/tmp/raw.bin", "application/octet-stream", bytes.Repeat([]byte{0, 1, 2}, 100000))
	resp, err = c.Do(ctx, "GET", client.SandboxPath(sbA.ID, "/files?path=/tmp/raw.bin"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(body, bytes.Repeat([]byte{0, 1, 2}, 100000)) {
		t.Fatalf("binary round trip: %d bytes", len(body))
	}
	var edit struct {
		Output string `json:"output"`
	}
	if err := c.Call(ctx, "POST", client.SandboxPath(sbA.ID, "/files/edit"), map[string]any{"command": "str_replace", "path": "/tmp/dir/hello.txt", "old_str": "world", "new_str": "sbx"}, &edit); err != nil {
		t.Fatal(err)
	}
	view := harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbA.ID+"/files/edit", api.ContentTypeJSON, []byte(`{"command":"view","path":"/tmp/dir/hello.txt"}`))
	if !strings.Contains(string(view), "sbx") {
		t.Fatalf("view after edit: %s", view)
	}
	// The executor's own errors pass through unchanged.
	st, data := harness.RawCall(t, e, "POST", "/v1/sandboxes/"+sbA.ID+"/files/edit", api.ContentTypeJSON, []byte(`{"command":"str_replace","path":"/tmp/dir/hello.txt","old_str":"nothere","new_str":"x"}`))
	if st/100 != 4 || !strings.Contains(string(data), `"no_match"`) {
		t.Fatalf("executor error: %d %s", st, data)
	}
	var listing struct {
		Entries []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"entries"`
	}
	if err := c.Call(ctx, "GET", client.SandboxPath(sbA.ID, "/fs/list?path=/tmp"), nil, &listing); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, en := range listing.Entries {
		names[en.Name] = en.Type
	}
	if names["dir"] != "dir" || names["raw.bin"] != "file" {
		t.Fatalf("fs list: %+v", listing)
	}

	// Archives: upload a tar, download the directory.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	_ = tw.WriteHeader(&tar.Header{Name: "sub/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "sub/f.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5})
	_, _ = tw.Write([]byte("tar!\n"))
	_ = tw.Close()
	harness.MustRaw(t, e, 200, "PUT", "/v1/sandboxes/"+sbA.ID+"/fs/archive?path=/tmp/up", "application/x-tar", tb.Bytes())
	resp, err = c.Do(ctx, "GET", client.SandboxPath(sbA.ID, "/fs/archive?path=/tmp/up"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(resp.Body)
	found := false
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if strings.HasSuffix(h.Name, "sub/f.txt") {
			b, _ := io.ReadAll(tr)
			found = string(b) == "tar!\n"
		}
	}
	resp.Body.Close()
	if !found {
		t.Fatal("downloaded archive lacks sub/f.txt")
	}
	// The rest of the executor routes the other way round: sessions
	// created raw and listed by the client, listing raw, archives uploaded
	// by the client and fetched raw, info by the client.
	rawSess := harness.DecodeJSON[struct {
		ID string `json:"id"`
	}](t, harness.MustRaw(t, e, 201, "POST", "/v1/sandboxes/"+sbA.ID+"/sessions", api.ContentTypeJSON, []byte(`{}`)))
	var sessList struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	if err := c.Call(ctx, "GET", client.SandboxPath(sbA.ID, "/sessions"), nil, &sessList); err != nil || len(sessList.Sessions) != 1 || sessList.Sessions[0].ID != rawSess.ID {
		t.Fatalf("client session list: %+v %v", sessList, err)
	}
	if !strings.Contains(string(harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/"+sbA.ID+"/fs/list?path=/tmp/dir", "", nil)), "hello.txt") {
		t.Fatal("raw fs list lacks hello.txt")
	}
	resp, err = c.Do(ctx, "PUT", client.SandboxPath(sbA.ID, "/fs/archive?path=/tmp/up2"), bytes.NewReader(tb.Bytes()), "application/x-tar")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/"+sbA.ID+"/fs/archive?path=/tmp/up2/sub/f.txt", "", nil); !bytes.Contains(got, []byte("tar!\n")) {
		t.Fatalf("raw archive download: %d bytes", len(got))
	}
	var infoReply map[string]any
	if err := c.Call(ctx, "GET", client.SandboxPath(sbA.ID, "/info"), nil, &infoReply); err != nil || infoReply["memory"] == nil {
		t.Fatalf("client info: %v %v", infoReply, err)
	}
	resp, err = c.Do(ctx, "GET", "/v1/openapi.yaml", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.HasPrefix(doc, []byte("openapi: 3")) {
		t.Fatalf("openapi document: %.40q", doc)
	}

	// Info from inside the sandbox.
	info := harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/"+sbA.ID+"/info", "", nil)
	if !strings.Contains(string(info), `"memory"`) {
		t.Fatalf("info: %s", info)
	}

	// A tunnel speaks the executor's own API (what executor/client uses).
	tunnel := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return c.DialExecutor(ctx, "srv-a")
	}}}
	tresp, err := tunnel.Post("http://executor/v1/exec", api.ContentTypeJSON, strings.NewReader(`{"argv":["echo","through the tunnel"]}`))
	if err != nil {
		t.Fatal(err)
	}
	tbody, _ := io.ReadAll(tresp.Body)
	tresp.Body.Close()
	if res := harness.DecodeJSON[execResult](t, tbody); res.Stdout != "through the tunnel\n" {
		t.Fatalf("exec through the tunnel: %s", tbody)
	}
	tunnel.CloseIdleConnections()
	if st, _ := harness.RawCall(t, e, "GET", "/v1/sandboxes/"+sbA.ID+"/connect", "", nil); st != http.StatusUpgradeRequired {
		t.Fatalf("connect without Upgrade: %d, want 426", st)
	}
	if _, err := c.DialExecutor(ctx, "nosuch"); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("tunnel to no sandbox: %v", err)
	}

	// Stats both ways.
	stats, err := c.Stats(ctx, sbA.ID)
	if err != nil || stats.MemoryCurrentBytes == 0 || stats.MemoryLimitBytes != 64<<20 {
		t.Fatalf("stats: %+v %v", stats, err)
	}
	harness.DecodeJSON[sbx.Usage](t, harness.MustRaw(t, e, 200, "GET", "/v1/sandboxes/"+sbB.ID+"/stats", "", nil))

	// Pause, resume (client); stop, start (raw).
	if sb, err := c.Pause(ctx, sbA.ID); err != nil || sb.Status != "paused" {
		t.Fatalf("pause: %v %v", sb, err)
	}
	if st, _ := harness.RawCall(t, e, "POST", "/v1/sandboxes/"+sbA.ID+"/exec", api.ContentTypeJSON, []byte(`{"argv":["true"]}`)); st != http.StatusConflict {
		t.Fatalf("exec in a paused sandbox: %d, want 409", st)
	}
	if sb, err := c.Resume(ctx, sbA.ID); err != nil || sb.Status != "running" {
		t.Fatalf("resume: %v %v", sb, err)
	}
	harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbB.ID+"/pause", "", nil)
	harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbB.ID+"/resume", "", nil)
	stopped := harness.DecodeJSON[api.Sandbox](t, harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbB.ID+"/stop", api.ContentTypeJSON, []byte(`{"timeout":"2s"}`)))
	if stopped.Status != "stopped" {
		t.Fatalf("stop: %+v", stopped)
	}
	if st, _ := harness.RawCall(t, e, "POST", "/v1/sandboxes/"+sbB.ID+"/exec", api.ContentTypeJSON, []byte(`{"argv":["true"]}`)); st != http.StatusConflict {
		t.Fatalf("exec in a stopped sandbox: %d, want 409", st)
	}
	started := harness.DecodeJSON[api.Sandbox](t, harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbB.ID+"/start", "", nil))
	if started.Status != "running" {
		t.Fatalf("start: %+v", started)
	}
	// The proxy reaches the new executor.
	res = harness.DecodeJSON[execResult](t, harness.MustRaw(t, e, 200, "POST", "/v1/sandboxes/"+sbB.ID+"/exec", api.ContentTypeJSON, []byte(`{"argv":["echo","again"]}`)))
	if res.Stdout != "again\n" {
		t.Fatalf("exec after restart: %+v", res)
	}
	if sb, err := c.Stop(ctx, sbA.ID, sbx.StopOptions{Timeout: time.Second}); err != nil || sb.Status != "stopped" {
		t.Fatalf("client stop: %v %v", sb, err)
	}
	if sb, err := c.Start(ctx, sbA.ID); err != nil || sb.Status != "running" {
		t.Fatalf("client start: %v %v", sb, err)
	}

	// Delete: refused without force while running, then both ways.
	if err := c.Remove(ctx, sbA.ID, sbx.RemoveOptions{Force: false}); client.StatusOf(err) != http.StatusConflict {
		t.Fatalf("remove without force: %v", err)
	}
	if err := c.Remove(ctx, sbA.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	harness.MustRaw(t, e, 204, "DELETE", "/v1/sandboxes/"+sbB.ID, "", nil)
	if _, err := c.Get(ctx, sbA.ID); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if st, _ := harness.RawCall(t, e, "POST", "/v1/sandboxes/"+sbB.ID+"/exec", api.ContentTypeJSON, []byte(`{"argv":["true"]}`)); st != 404 {
		t.Fatalf("exec after delete: %d", st)
	}
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health: %+v %v", h, err)
	}
}

// TestServerLimits checks the proxy's body cap, the sandbox maximum, the
// concurrent-create bound and TTL reaping while the server runs.
func TestServerLimits(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{MaxSandboxes: 2}, func(c *server.Config) {
		c.MaxUploadBytes = 1 << 20
		c.MaxReplyBytes = 256 << 10
		c.MaxConcurrentCreates = 1
	})
	ctx := context.Background()
	a, err := e.C.Create(ctx, harness.BusyboxCreate(""))
	if err != nil {
		t.Fatal(err)
	}
	e.See(a.ID)
	// Uploads over the cap: with a Content-Length, and streamed without.
	st, data := harness.RawCall(t, e, "PUT", "/v1/sandboxes/"+a.ID+"/files?path=/tmp/big", "application/octet-stream", make([]byte, 2<<20))
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(string(data), api.CodeTooLarge) {
		t.Fatalf("upload over the cap: %d %s", st, data)
	}
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 64<<10)
		for i := 0; i < 40; i++ {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	_, err = e.C.Do(ctx, "PUT", client.SandboxPath(a.ID, "/files?path=/tmp/big2"), pr, "application/octet-stream")
	if s := client.StatusOf(err); s != http.StatusRequestEntityTooLarge && s != http.StatusBadGateway && err == nil {
		t.Fatalf("chunked upload over the cap: %v", err)
	}
	// A proxied JSON body is held to the server's request limit (1 MiB
	// here), like every other JSON body: a 5 MB exec never reaches the
	// executor, with a Content-Length or streamed.
	bigExec := []byte(`{"argv":["sh","-c","echo reached > /tmp/exec-reached"],"env":{"PAD":"` + strings.Repeat("x", 5<<20) + `"}}`)
	if st, data := harness.RawCall(t, e, "POST", "/v1/sandboxes/"+a.ID+"/exec", "application/json", bigExec); st != http.StatusRequestEntityTooLarge || !strings.Contains(string(data), api.CodeTooLarge) {
		t.Fatalf("5 MB exec body: %d %.200s", st, data)
	}
	pr2, pw2 := io.Pipe()
	go func() { _, _ = pw2.Write(bigExec); _ = pw2.Close() }()
	_, err = e.C.Do(ctx, "POST", client.SandboxPath(a.ID, "/exec"), pr2, "application/json")
	if s := client.StatusOf(err); s != http.StatusRequestEntityTooLarge && s != http.StatusBadGateway {
		t.Fatalf("streamed 5 MB exec body: %v", err)
	}
	var res execResult
	if err := e.C.Call(ctx, "POST", client.SandboxPath(a.ID, "/exec"), map[string]any{"command": "cat /tmp/exec-reached 2>&1"}, &res); err != nil || strings.Contains(res.Stdout, "reached\n") {
		t.Fatalf("an exec over the body limit ran: %q %v", res.Stdout, err)
	}
	if err := e.C.Call(ctx, "POST", client.SandboxPath(a.ID, "/exec"), map[string]any{"command": "ls /tmp/big /tmp/big2 2>&1 | wc -l; ls /tmp"}, &res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "big") && !strings.Contains(res.Stdout, "No such") {
		t.Fatalf("a refused upload left a file: %q", res.Stdout)
	}

	// Replies from the executor are capped: a file under the cap comes
	// whole, one over it is cut off, never passed on in full.
	var made execResult
	if err := e.C.Call(ctx, "POST", client.SandboxPath(a.ID, "/exec"), map[string]any{"command": "head -c 200000 /dev/zero > /tmp/small; head -c 4000000 /dev/zero > /tmp/large"}, &made); err != nil || made.ExitCode != 0 {
		t.Fatalf("make files: %+v %v", made, err)
	}
	if st, data := harness.RawCall(t, e, "GET", "/v1/sandboxes/"+a.ID+"/files?path=/tmp/small", "", nil); st != 200 || len(data) != 200000 {
		t.Fatalf("file under the reply cap: %d, %d bytes", st, len(data))
	}
	req0, _ := http.NewRequest("GET", e.URL+"/v1/sandboxes/"+a.ID+"/files?path=/tmp/large", nil)
	req0.Header.Set("Authorization", "Bearer "+harness.ServerTestToken)
	if resp, err := http.DefaultClient.Do(req0); err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if (resp.StatusCode == 200 && rerr == nil) || n >= 4000000 {
			t.Fatalf("file over the reply cap: HTTP %d, %d bytes, read error %v", resp.StatusCode, n, rerr)
		}
	}

	// A TTL sandbox disappears while the server runs, with an event.
	events := make(chan api.Event, 64)
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	// From the host's last event: the stream replays what happens before
	// its request reaches the server.
	since := e.Host.LastEventSeq()
	go func() { _ = e.C.Events(ectx, since, func(ev api.Event) error { events <- ev; return nil }) }()
	// (A TTL that a loaded machine's create does not use up before the
	// 429 below: it runs from the create's start, and an expired sandbox
	// frees its slot.)
	req := harness.BusyboxCreate("")
	req.TTL = 5 * time.Second
	b, err := e.C.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e.See(b.ID)
	// The maximum of 2 is reached: 429.
	if _, err := e.C.Create(ctx, harness.BusyboxCreate("")); client.StatusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("create over the maximum: %v", err)
	}
	deadline := time.After(30 * time.Second)
	for removed := false; !removed; {
		select {
		case ev := <-events:
			removed = ev.Type == sbx.EventRemoved && ev.Sandbox == b.ID
		case <-deadline:
			t.Fatal("the TTL sandbox was not removed within 30s")
		}
	}
	if _, err := e.C.Get(ctx, b.ID); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("expired sandbox still there: %v", err)
	}

	// Concurrent creates beyond the bound get 429 while one is in flight.
	results := make(chan error, 3)
	for range 3 {
		go func() {
			sb, err := e.C.Create(ctx, harness.BusyboxCreate(""))
			if err == nil {
				e.See(sb.ID)
			}
			results <- err
		}()
	}
	var ok, limited int
	for range 3 {
		err := <-results
		switch {
		case err == nil:
			ok++
		case client.StatusOf(err) == http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("concurrent create: %v", err)
		}
	}
	if ok != 1 || limited != 2 {
		t.Fatalf("3 concurrent creates with 1 slot left and 1 create at a time: %d ok, %d limited", ok, limited)
	}
}

// TestServerEventsInOrder follows one sandbox's life through the event
// stream, including changes made outside the server: a PID 1 killed from
// the host, an OOM kill, and a sandbox created by another process.
func TestServerEventsInOrder(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events := make(chan api.Event, 256)
	// From the host's last event: the stream replays what happens before
	// its request reaches the server.
	since := e.Host.LastEventSeq()
	go func() { _ = e.C.Events(ctx, since, func(ev api.Event) error { events <- ev; return nil }) }()
	var first, last uint64 // ids start after the server's boot epoch
	expect := func(id string, types ...string) {
		t.Helper()
		for _, want := range types {
			select {
			case ev := <-events:
				if ev.Seq != last+1 && last != 0 {
					t.Fatalf("event seq %d after %d", ev.Seq, last)
				}
				if first == 0 {
					first = ev.Seq
				}
				last = ev.Seq
				if ev.Type != want || ev.Sandbox != id {
					t.Fatalf("event %s for %s, want %s for %s", ev.Type, ev.Sandbox, want, id)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no %s event within 20s", want)
			}
		}
	}
	// A raw SSE reader sees the same stream.
	rawReq, _ := http.NewRequestWithContext(ctx, "GET", e.URL+"/v1/events", nil)
	rawReq.Header.Set("Authorization", "Bearer "+harness.ServerTestToken)
	rawResp, err := http.DefaultClient.Do(rawReq)
	if err != nil {
		t.Fatal(err)
	}
	defer rawResp.Body.Close()
	if ct := rawResp.Header.Get("Content-Type"); ct != api.ContentTypeSSE {
		t.Fatalf("events Content-Type %q", ct)
	}
	rawLines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(rawResp.Body)
		for sc.Scan() {
			rawLines <- sc.Text()
		}
	}()
	req := harness.BusyboxCreate("ev")
	req.Limits.MemoryBytes = 96 << 20
	sb, err := e.C.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	expect(sb.ID, sbx.EventCreated, sbx.EventReady)
	_, _ = e.C.Pause(ctx, sb.ID)
	_, _ = e.C.Resume(ctx, sb.ID)
	expect(sb.ID, sbx.EventPaused, sbx.EventResumed)

	// An OOM kill inside the sandbox.
	var res execResult
	// (The limit leaves room for the executor: the kernel counts its 20 MB
	// static binary as resident, and with a tighter limit it, not dd, is
	// the OOM killer's choice.)
	if err := e.C.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"command": "dd if=/dev/zero of=/dev/null bs=256M count=1"}, &res); err != nil || res.ExitCode != 137 {
		t.Fatalf("memory hog: %+v %v", res, err)
	}
	expect(sb.ID, sbx.EventOOM)

	// PID 1 killed from the host: the watcher reports the exit.
	got, _ := e.C.Get(ctx, sb.ID)
	if err := unix.Kill(got.Pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	expect(sb.ID, sbx.EventExited)
	if _, err := e.C.Start(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	expect(sb.ID, sbx.EventStarted)

	// A sandbox created and removed by another process (a CLI).
	other, err := sandbox.Open(sandbox.HostConfig{Root: e.Root, RunRoot: e.RunRoot, Executor: harness.ServerExecutorBin()})
	if err != nil {
		t.Fatal(err)
	}
	osb, err := other.Create(ctx, sbx.Options{Rootfs: fixture.CacheDir + "/busybox"})
	if err != nil {
		t.Fatal(err)
	}
	e.See(osb.ID)
	expect(osb.ID, sbx.EventCreated, sbx.EventReady)
	if err := other.Remove(ctx, osb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	expect(osb.ID, sbx.EventRemoved)
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	expect(sb.ID, sbx.EventRemoved)

	// The raw stream carried the same events, as id/event/data records.
	var rawEvents []string
	for len(rawEvents) < int(last-first+1) {
		select {
		case l := <-rawLines:
			if typ, ok := strings.CutPrefix(l, "event: "); ok {
				rawEvents = append(rawEvents, typ)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("raw SSE stream: %d of %d events: %v", len(rawEvents), last-first+1, rawEvents)
		}
	}
	if rawEvents[0] != sbx.EventCreated || rawEvents[len(rawEvents)-1] != sbx.EventRemoved {
		t.Fatalf("raw SSE stream: %v", rawEvents)
	}

	// The counters moved.
	resp, err := e.C.Do(ctx, "GET", "/metrics", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"sbx_oom_kills_total 1", `sbx_sandbox_creates_total{result="ok"} 1`, `sbx_exec_requests_total{kind="exec"} 1`, "sbx_sandbox_create_duration_seconds_count 1"} {
		if !strings.Contains(string(metrics), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestServerMetricsMove scrapes /metrics before and after some work.
func TestServerMetricsMove(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx := context.Background()
	scrape := func() map[string]float64 {
		resp, err := e.C.Do(ctx, "GET", "/metrics", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]float64{}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			var v float64
			fmt.Sscan(line[i+1:], &v)
			out[line[:i]] = v
		}
		return out
	}
	before := scrape()
	sb, err := e.C.Create(ctx, harness.BusyboxCreate(""))
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	for range 5 {
		if err := e.C.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"argv": []string{"true"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = e.C.Get(ctx, "nosuch")
	mid := scrape()
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	after := scrape()
	for name, delta := range map[string]float64{
		`sbx_sandbox_creates_total{result="ok"}`:                                   1,
		`sbx_sandbox_create_duration_seconds_count`:                                1,
		`sbx_exec_requests_total{kind="exec"}`:                                     5,
		`sbx_errors_total{code="not_found"}`:                                       1,
		`sbx_http_requests_total{code="200",route="POST /v1/sandboxes/{id}/exec"}`: 5,
	} {
		if got := mid[name] - before[name]; got != delta {
			t.Errorf("%s moved by %v, want %v", name, got, delta)
		}
	}
	if mid[`sbx_sandboxes{state="running"}`] != 1 || after[`sbx_sandboxes{state="running"}`] != 0 {
		t.Errorf("sbx_sandboxes{state=running}: %v then %v, want 1 then 0", mid[`sbx_sandboxes{state="running"}`], after[`sbx_sandboxes{state="running"}`])
	}
	if after[`sbx_http_requests_total{code="204",route="DELETE /v1/sandboxes/{id}"}`] != 1 {
		t.Errorf("the delete was not counted")
	}
}

// TestServerBridgePublish creates a bridged sandbox with a published port
// over the API and reaches a server inside it from the host.
func TestServerBridgePublish(t *testing.T) {
	fixture.BusyboxRootfs(t)
	// The bridge lives in a namespace that stands in for the host.
	hostNS := "/run/netns/" + harness.HostNS(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{HostNetNS: hostNS}, nil)
	ctx := context.Background()
	data := harness.MustRaw(t, e, 201, "POST", "/v1/sandboxes", api.ContentTypeJSON,
		[]byte(`{"rootfs":"`+fixture.CacheDir+`/busybox","network":"bridge","publish":["127.0.0.1:0:8080"]}`))
	sb := harness.DecodeJSON[struct {
		ID      string `json:"id"`
		Network struct {
			IP    string `json:"ip"`
			Ports []struct {
				HostPort      int `json:"host_port"`
				ContainerPort int `json:"container_port"`
			} `json:"ports"`
		} `json:"network"`
	}](t, data)
	e.See(sb.ID)
	if sb.Network.IP == "" || len(sb.Network.Ports) != 1 || sb.Network.Ports[0].HostPort == 0 {
		t.Fatalf("bridged sandbox: %s", data)
	}
	var res execResult
	if err := e.C.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"command": "mkdir -p /tmp/www && echo hello-from-inside > /tmp/www/index.html && httpd -p 8080 -h /tmp/www"}, &res); err != nil || res.ExitCode != 0 {
		t.Fatalf("start httpd: %+v %v", res, err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", sb.Network.Ports[0].HostPort)
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := harness.HTTPClientInNS(t, hostNS).Get(url)
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("published port %s: %v", url, err)
		}
	}
	if string(body) != "hello-from-inside\n" {
		t.Fatalf("published port answered %q", body)
	}
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
}
