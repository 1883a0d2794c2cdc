package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestServerImages pulls from an in-process registry through the API,
// with and without NDJSON progress, lists and removes, and checks the
// events and error statuses.
func TestServerImages(t *testing.T) {
	reg := fixture.StartRegistry(t)
	ref := reg.Push(t, "library/busybox:1", fixture.BusyboxImage(t))
	ref2 := reg.Push(t, "library/busybox:2", fixture.BusyboxImage(t))
	e := harness.NewServerEnv(t, sandbox.HostConfig{Pull: sbx.PullNever}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events := make(chan api.Event, 64)
	// From the host's last event: the stream replays what happens before
	// its request reaches the server.
	since := e.Host.LastEventSeq()
	go func() { _ = e.C.Events(ctx, since, func(ev api.Event) error { events <- ev; return nil }) }()

	// Through the client with progress.
	var phases []string
	img, err := e.C.PullImage(ctx, ref, func(p api.PullProgress) { phases = append(phases, p.Phase) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(img.Name, "library/busybox:1") || !strings.HasPrefix(img.Digest, "sha256:") || img.SizeBytes == 0 {
		t.Fatalf("pulled: %+v", img)
	}
	if len(phases) == 0 || phases[len(phases)-1] != "done" && phases[len(phases)-1] != "cached" {
		t.Fatalf("progress phases: %v", phases)
	}
	// Raw HTTP without progress: one JSON reply.
	data := harness.MustRaw(t, e, 200, "POST", "/v1/images/pull", api.ContentTypeJSON, []byte(`{"ref":"`+ref2+`"}`))
	if img2 := harness.DecodeJSON[api.Image](t, data); img2.Digest != img.Digest {
		t.Fatalf("second tag of the same image: %+v", img2)
	}
	// Raw HTTP with NDJSON: progress lines, then the result.
	data = harness.MustRaw(t, e, 200, "POST", "/v1/images/pull?progress=1", api.ContentTypeJSON, []byte(`{"ref":"`+ref+`"}`))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var last api.PullFrame
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Type != api.FrameResult || len(lines) < 2 {
		t.Fatalf("NDJSON pull: %s", data)
	}
	// Errors: an unknown tag (in the stream and without), a bad reference.
	if _, err := e.C.PullImage(ctx, reg.Host+"/library/busybox:nope", func(api.PullProgress) {}); !client.IsCode(err, api.CodeNotFound) {
		t.Fatalf("pull of an unknown tag with progress: %v", err)
	}
	if st, body := harness.RawCall(t, e, "POST", "/v1/images/pull", api.ContentTypeJSON, []byte(`{"ref":"`+reg.Host+`/library/busybox:nope"}`)); st != http.StatusNotFound {
		t.Fatalf("pull of an unknown tag: %d %s", st, body)
	}
	if st, body := harness.RawCall(t, e, "POST", "/v1/images/pull", api.ContentTypeJSON, []byte(`{"ref":"UPPER CASE!!"}`)); st != http.StatusUnprocessableEntity {
		t.Fatalf("pull of a bad reference: %d %s", st, body)
	}

	// A sandbox from the pulled image, and one from an image not in the
	// cache (the server's policy here is never to pull on create).
	sb, err := e.C.Create(ctx, sbx.Options{Image: ref, Env: []string{"FROM=image"}})
	if err != nil {
		t.Fatal(err)
	}
	e.See(sb.ID)
	var res execResult
	if err := e.C.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"command": "echo $FROM; ls /bin/busybox"}, &res); err != nil || res.Stdout != "image\n/bin/busybox\n" {
		t.Fatalf("exec in a sandbox from an image: %+v %v", res, err)
	}
	if err := e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.C.Create(ctx, sbx.Options{Image: reg.Host + "/not/cached:1"}); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("create from an image not in the cache: %v", err)
	}
	// A create that must pull from a registry it cannot reach answers 502
	// registry_unreachable, as a pull does.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := l.Addr().String() + "/x:1"
	l.Close()
	if _, err := e.C.Create(ctx, sbx.Options{Image: unreachable, Pull: sbx.PullMissing}); client.StatusOf(err) != http.StatusBadGateway ||
		!client.IsCode(err, api.CodeRegistryUnreachable) || !errors.Is(err, sbx.ErrRegistryUnreachable) {
		t.Fatalf("create from an unreachable registry: %v", err)
	}
	if st, body := harness.RawCall(t, e, "POST", "/v1/sandboxes", api.ContentTypeJSON, []byte(`{"image":"`+unreachable+`","pull":"always"}`)); st != http.StatusBadGateway {
		t.Fatalf("raw create from an unreachable registry: %d %s", st, body)
	}

	list, err := e.C.ListImages(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	raw := harness.DecodeJSON[api.ImageList](t, harness.MustRaw(t, e, 200, "GET", "/v1/images", "", nil))
	if len(raw.Images) != 2 {
		t.Fatalf("raw list: %+v", raw)
	}
	if err := e.C.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	harness.MustRaw(t, e, 204, "DELETE", "/v1/images/"+ref2, "", nil)
	if err := e.C.RemoveImage(ctx, ref); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("remove of a removed image: %v", err)
	}
	if list, _ := e.C.ListImages(ctx); len(list) != 0 {
		t.Fatalf("images left: %+v", list)
	}
	want := []string{sbx.EventImagePulled, sbx.EventImagePulled, sbx.EventImagePulled, sbx.EventImageRemoved, sbx.EventImageRemoved}
	for i, w := range want {
		ev := nextImageEvent(t, events)
		if ev.Type != w {
			t.Fatalf("event %d: %s %s, want %s", i, ev.Type, ev.Image, w)
		}
	}
}

// nextImageEvent returns the next image event, skipping sandbox events.
func nextImageEvent(t *testing.T, events <-chan api.Event) api.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if strings.HasPrefix(ev.Type, "image.") {
				return ev
			}
		case <-timeout:
			t.Fatal("no image event within 10s")
		}
	}
}
