package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAttach measures the network part of a sandbox start: none (a new
// namespace with loopback, as libcontainer makes it), bridge without the pool
// (namespace, veth, address, route, anti-spoofing, rules) and bridge with a
// prepared namespace from the pool (rules only). Teardown is not timed.
func BenchmarkAttach(b *testing.B) {
	e := newTestEnv(b)
	ctx := context.Background()
	pub, _ := ParsePublish("0:80")
	opts := AttachOptions{Mode: ModeBridge, Publish: []PortMapping{pub}}
	// Each bridge figure is also reported as a ratio to none, measured in
	// the same run (the anchor).
	var noneNs float64
	perOp := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
	ratio := func(b *testing.B) {
		if noneNs > 0 {
			b.ReportMetric(perOp(b)/noneNs, "x-none")
		}
	}

	b.Run("none", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p := filepath.Join(e.dir, fmt.Sprintf("none-%d", i))
			if _, err := e.net.Attach(ctx, "bench", AttachOptions{Mode: ModeNone}); err != nil {
				b.Fatal(err)
			}
			if err := CreateNamespace(p, loUp); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			must(b, RemoveNamespace(p))
			b.StartTimer()
		}
		noneNs = perOp(b)
	})
	b.Run("bridge", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := e.net.Attach(ctx, "bench", opts); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			must(b, e.net.Detach(ctx, "bench"))
			b.StartTimer()
		}
		ratio(b)
	})
	b.Run("bridge-pool", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if _, err := e.net.Prepare(ctx, 1); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			a, err := e.net.Attach(ctx, "bench", opts)
			if err != nil {
				b.Fatal(err)
			}
			if !a.FromPool {
				b.Fatal("pool not used")
			}
			b.StopTimer()
			must(b, e.net.Detach(ctx, "bench"))
			b.StartTimer()
		}
		ratio(b)
	})
	b.Run("detach", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if _, err := e.net.Attach(ctx, "bench", opts); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			must(b, e.net.Detach(ctx, "bench"))
		}
		ratio(b)
	})
}

// BenchmarkThroughput sends 32 MiB per iteration over TCP: over loopback
// inside a sandbox namespace, from the host to the sandbox through the veth
// and bridge, and from the sandbox to the internet namespace through NAT.
func BenchmarkThroughput(b *testing.B) {
	e := newTestEnv(b)
	a := e.attach("tput", AttachOptions{})
	const chunk = 32 << 20
	var loopbackNs float64 // the anchor: veth and NAT are also reported as x-loopback
	run := func(b *testing.B, serverNS, listen, clientNS, dial string) {
		var ln net.Listener
		must(b, InNamespacePath(serverNS, func() (err error) {
			ln, err = net.Listen("tcp4", listen)
			return err
		}))
		defer ln.Close()
		done := make(chan int64, 1)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				n, _ := io.Copy(io.Discard, c)
				c.Close()
				done <- n
			}
		}()
		buf := make([]byte, 256<<10)
		b.SetBytes(chunk)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var c net.Conn
			must(b, InNamespacePath(clientNS, func() (err error) {
				c, err = net.DialTimeout("tcp4", dial, 5*time.Second)
				return err
			}))
			c.SetDeadline(time.Now().Add(30 * time.Second))
			for sent := 0; sent < chunk; sent += len(buf) {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
			select {
			case n := <-done:
				if n != chunk {
					b.Fatalf("received %d bytes, want %d", n, chunk)
				}
			case <-time.After(30 * time.Second):
				b.Fatal("receiver did not finish within 30s")
			}
		}
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if b.Name() == "BenchmarkThroughput/loopback" {
			loopbackNs = perOp
		} else if loopbackNs > 0 {
			b.ReportMetric(loopbackNs/perOp, "x-loopback")
		}
	}
	b.Run("loopback", func(b *testing.B) {
		run(b, a.NetNSPath, "127.0.0.1:9000", a.NetNSPath, "127.0.0.1:9000")
	})
	b.Run("veth", func(b *testing.B) {
		run(b, a.NetNSPath, "0.0.0.0:9001", e.hostNS, a.IP.String()+":9001")
	})
	b.Run("nat", func(b *testing.B) {
		run(b, e.inetNS, webIP+":9002", a.NetNSPath, webIP+":9002")
	})
}

// BenchmarkReconfigure measures the network part of a personalised claim:
// a pool member (attached with a standby holder and the default policy)
// gets an egress allow-list and a published port (Reconfigure, then
// Wait), as sbx bench's personalised claim asks. Attaching and detaching
// the member are not timed. Sub-benchmarks split the claim: decide
// (Reconfigure: the lock, the leases read, the ports bound) and apply
// (Wait: the ports handed over, the lease written, the rules' batch).
func BenchmarkReconfigure(b *testing.B) {
	e := newTestEnv(b)
	ctx := context.Background()
	e.attach("bench-other-1", AttachOptions{Standby: true})
	e.attach("bench-other-2", AttachOptions{Standby: true})
	pub, _ := ParsePublish("127.0.0.1:0:8080")
	allow, err := ParseEgress("192.0.2.0/24")
	if err != nil {
		b.Fatal(err)
	}
	claim := AttachOptions{Mode: ModeBridge, Egress: allow, Publish: []PortMapping{pub}, Hostname: "job"}
	var decide, apply time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := e.net.Attach(ctx, "bench", AttachOptions{Mode: ModeBridge, Standby: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		r, err := e.net.Reconfigure(ctx, "bench", claim)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := r.Wait(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		decide += t1.Sub(t0)
		apply += t2.Sub(t1)
		b.StopTimer()
		must(b, e.net.Detach(ctx, "bench"))
		b.StartTimer()
	}
	b.ReportMetric(float64(decide.Microseconds())/float64(b.N), "µs-decide")
	b.ReportMetric(float64(apply.Microseconds())/float64(b.N), "µs-apply")
}
