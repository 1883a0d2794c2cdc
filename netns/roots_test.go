package netns

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two sbx roots (two state directories) attach sandboxes to one bridge at
// once: they share the leases and the lock, so no address, veth or rule is
// given twice; one root's GC, detaches and pool drain leave the other's
// sandboxes working, and Reset refuses while the other root holds leases.
func TestTwoRootsShareOneBridge(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	cfgB := e.cfg
	cfgB.StateDir, cfgB.RunDir = filepath.Join(e.dir, "state-b"), filepath.Join(e.dir, "run-b")
	b, err := Open(cfgB)
	must(t, err)
	t.Cleanup(func() {
		// What a failed test left of root b's.
		if _, err := b.GC(ctx, nil); err != nil {
			t.Errorf("final gc of root b: %v", err)
		}
		b.Close()
	})
	roots := map[string]*Network{"a": e.net, "b": b}

	const perRoot, workers = 10, 4
	type job struct{ root, id string }
	jobs := make(chan job)
	var mu sync.Mutex
	got := map[string]*Attachment{}
	var errs []error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				a, err := roots[j.root].Attach(ctx, j.id, AttachOptions{Mode: ModeBridge})
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", j.id, err))
				} else {
					got[j.id] = a
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < perRoot; i++ {
		for _, r := range []string{"a", "b"} {
			jobs <- job{r, fmt.Sprintf("%s%d", r, i)}
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("attach failed: %v", errs)
	}
	byIP, byVeth := map[string]string{}, map[string]string{}
	for id, a := range got {
		if other, dup := byIP[a.IP.String()]; dup {
			t.Errorf("%s and %s both got %s", id, other, a.IP)
		}
		if other, dup := byVeth[a.HostVeth]; dup {
			t.Errorf("%s and %s both got veth %s", id, other, a.HostVeth)
		}
		byIP[a.IP.String()], byVeth[a.HostVeth] = id, id
	}
	// Every sandbox of both roots reaches the internet through its rules.
	for _, id := range []string{"a0", "a9", "b0", "b9"} {
		e.expectGet(got[id].NetNSPath, webIP+":80", "internet")
	}
	// Root a drops half of its sandboxes, garbage-collects with only the
	// rest live and fills and drains its pool: root b keeps everything, and
	// its sandboxes their traffic through every step.
	probe := func(step string) {
		t.Helper()
		var bad []string
		for i := 0; i < perRoot; i++ {
			id := fmt.Sprintf("b%d", i)
			if g, err := get(got[id].NetNSPath, webIP+":80", 3*time.Second); err != nil || g != "internet" {
				bad = append(bad, id+" "+got[id].IP.String())
			}
		}
		if len(bad) > 0 {
			t.Fatalf("after root a's %s, root b's sandboxes cannot reach the internet: %v", step, bad)
		}
	}
	live := map[string]bool{}
	for i := 0; i < perRoot; i++ {
		id := fmt.Sprintf("a%d", i)
		if i%2 == 0 {
			must(t, e.net.Detach(ctx, id))
		} else {
			live[id] = true
		}
	}
	probe("detach")
	_, err = e.net.Prepare(ctx, 2)
	must(t, err)
	probe("prepare")
	removed, err := e.net.GC(ctx, live)
	probe("gc")
	must(t, err)
	if len(removed) > 0 {
		t.Errorf("root a's gc removed %v; nothing of its own was stale and root b's are not its own", removed)
	}
	if n, _ := b.Prepared(); n != 0 {
		t.Errorf("root b sees %d prepared namespaces of root a", n)
	}
	must(t, e.net.DiscardPrepared(ctx))
	probe("discard")
	if err := e.net.Reset(ctx); err == nil || !strings.Contains(err.Error(), "b1 of the root at") {
		t.Errorf("reset while both roots hold leases: %v", err)
	}
	for i := 0; i < perRoot; i++ {
		id := fmt.Sprintf("b%d", i)
		if a, err := b.Lookup(id); err != nil || a == nil || a.IP != got[id].IP {
			t.Fatalf("root b's %s after root a's gc: %+v, %v", id, a, err)
		}
		e.expectGet(got[id].NetNSPath, webIP+":80", "internet")
	}
	// Sandboxes never reach each other, in one root or across.
	e.startBusyboxHTTPD(got["b1"].NetNSPath, 8080, "b1")
	e.expectBlocked(got["a1"].NetNSPath, got["b1"].IP.String()+":8080")
	e.expectBlocked(got["b3"].NetNSPath, got["b1"].IP.String()+":8080")
	e.expectGet(e.hostNS, got["b1"].IP.String()+":8080", "b1")

	// Root b's gc of a set that does not name root a's sandboxes leaves
	// them too.
	bLive := map[string]bool{}
	for i := 0; i < perRoot; i++ {
		bLive[fmt.Sprintf("b%d", i)] = true
	}
	removed, err = b.GC(ctx, bLive)
	must(t, err)
	if len(removed) > 0 {
		t.Errorf("root b's gc removed %v", removed)
	}
	e.expectGet(got["a1"].NetNSPath, webIP+":80", "internet")

	// A deleted root's leases are collected by the other root's sweep (sbx
	// gc, a server's start) and its GC.
	must(t, os.RemoveAll(e.cfg.StateDir))
	swept, err := b.SweepInterrupted(ctx)
	must(t, err)
	if len(swept) != perRoot/2 {
		t.Errorf("root b's sweep after root a was deleted removed %v, want root a's %d leases", swept, perRoot/2)
	}
	removed, err = b.GC(ctx, bLive)
	must(t, err)
	if len(removed) > 0 {
		t.Errorf("root b's gc after the sweep removed %v", removed)
	}
	for id := range bLive {
		must(t, b.Detach(ctx, id))
	}
	if left := e.leftovers(); len(left) > 0 {
		t.Fatalf("left after both roots are done: %v", left)
	}
	if _, err := os.Stat(e.net.shared); !os.IsNotExist(err) {
		t.Errorf("shared state directory %s left with no lease: %v", e.net.shared, err)
	}
	must(t, b.Reset(ctx))
}
