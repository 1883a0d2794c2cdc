package sandbox

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

// TestEventsSeeOtherProcessesAtOnce checks that a host without the full
// background work (sbx events without a server) reports a sandbox another
// process records as soon as its directory changes, not at the next
// periodic look: the look here is an hour away.
func TestEventsSeeOtherProcessesAtOnce(t *testing.T) {
	dir := shortTempDir(t)
	cfg := HostConfig{Root: filepath.Join(dir, "root"), RunRoot: filepath.Join(dir, "run"), WatchInterval: time.Hour}
	watcher, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	other, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watcher.supervisor.start(ctx, false)
	_, sub := watcher.events.bus.subscribe(watcher.events.bus.last(), false)
	defer watcher.events.bus.unsubscribe(sub)

	id := "bbbb" + strings.Repeat("0", 28)
	put(t, other, sbx.Sandbox{ID: id, Name: "elsewhere", Status: sbx.StatusStopped, Created: time.Now()})
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-sub.ch:
			if e.Sandbox == id && e.Type == sbx.EventCreated {
				return
			}
		case <-deadline:
			t.Fatal("no sandbox.created event for a sandbox another process recorded (the watcher did not wake on the state directory)")
		}
	}
}
