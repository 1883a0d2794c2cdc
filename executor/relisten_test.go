package executor

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// The HTTP server's Accept goes on across a detach and an attach: a
// connection to the new listener is accepted, none to the closed one.
func TestRelistenerSwapsListeners(t *testing.T) {
	dir := t.TempDir()
	first, err := net.Listen("unix", filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	rl := newRelistener(first)
	accepted := make(chan net.Conn, 1)
	go func() {
		for {
			c, err := rl.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	if err := rl.detach(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("unix", filepath.Join(dir, "a")); err == nil {
		t.Fatal("the detached listener still accepts")
	}
	second, err := net.Listen("unix", filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.attach(second); err != nil {
		t.Fatal(err)
	}
	if err := rl.attach(second); err == nil {
		t.Fatal("a second attach was taken")
	}
	c, err := net.Dial("unix", filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case got := <-accepted:
		if got == nil {
			t.Fatal("Accept failed after the attach")
		}
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted on the new listener")
	}
	rl.Close()
	if _, ok := <-accepted; ok {
		t.Fatal("Accept went on after Close")
	}
}
