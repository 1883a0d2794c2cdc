package netns

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHolderReaperHoldsNoThread: the goroutine that reaps a port holder
// waits in the runtime's poller, not in a wait system call, so a server
// with many holders keeps no thread (and, right after a spawn, none of
// the scheduler's Ps) for each.
func TestHolderReaperHoldsNoThread(t *testing.T) {
	e := newTestEnv(t)
	var ready []*os.File
	defer func() {
		for _, w := range ready {
			w.Close() // unreleased: each holder ends
		}
	}()
	for range 4 {
		_, w, err := e.net.spawnHolder(nil)
		if err != nil {
			t.Fatal(err)
		}
		ready = append(ready, w)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n := threadsInWait(); n > 0 {
			t.Fatalf("%d of this process's threads wait in waitid or wait4 while holders live", n)
		}
	}
}

// threadsInWait counts this process's threads in the waitid or wait4
// system call.
func threadsInWait() int {
	waits := map[string]bool{"247": true, "61": true} // x86-64 waitid, wait4
	if runtime.GOARCH == "arm64" {
		waits = map[string]bool{"95": true, "260": true}
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/syscall")
	n := 0
	for _, p := range tasks {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if nr, _, _ := strings.Cut(string(data), " "); waits[nr] {
			n++
		}
	}
	return n
}

// TestCloseWaitsForTheRestock: a restock started in the background (after
// a claim took stocked sockets) is over by the time Close returns, and
// leaves no socket open; none starts after Close.
func TestCloseWaitsForTheRestock(t *testing.T) {
	e := newTestEnv(t)
	nw, err := Open(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := openSockets(t)
	nw.restockLater()
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	nw.restockLater() // closed: makes nothing
	if after := openSockets(t); after > before {
		t.Fatalf("%d sockets open after Close, %d before the restock", after, before)
	}
}

// openSockets counts this process's open sockets.
func openSockets(t *testing.T) int {
	t.Helper()
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}
