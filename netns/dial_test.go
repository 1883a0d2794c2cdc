package netns

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestDialReachesLoopbackOfANamespace(t *testing.T) {
	requireRoot(t)
	ns := filepath.Join(t.TempDir(), "ns")
	if err := CreateNamespace(ns, loUp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveNamespace(ns) })
	// A server on the namespace's loopback, which the host cannot reach.
	var ln net.Listener
	if err := InNamespacePath(ns, func() (err error) {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("inside"))
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ns, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "inside" {
		t.Fatalf("read %q", got)
	}
	// The connection was made in the namespace, not on the host.
	if hc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		got, _ := io.ReadAll(hc)
		hc.Close()
		if string(got) == "inside" {
			t.Fatal("the host's loopback reached the namespace's server")
		}
	}
	// Nothing listening: refused, and said so.
	if _, err := Dial(ctx, ns, "tcp", "127.0.0.1:1"); err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
	if _, err := Dial(ctx, filepath.Join(t.TempDir(), "missing"), "tcp", addr); err == nil {
		t.Fatal("dial in a missing namespace succeeded")
	}
}
