package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/client"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// BenchmarkServerCreateExecDelete measures one sandbox's whole life over
// HTTP (create, exec of true, delete) at concurrency 1 and 8, and the same
// cycle straight through the Host and the executor socket as the anchor
// in the same run. It reports the median and p99 of one cycle.
//
//	go test -tags 'seccomp netgo osusergo' -run '^$' -bench ServerCreateExecDelete -benchtime 60x ./tests/
func BenchmarkServerCreateExecDelete(b *testing.B) {
	fixture.BusyboxRootfs(b)
	rootfs := fixture.CacheDir + "/busybox"
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("http/c%d", conc), func(b *testing.B) {
			e := harness.NewServerEnv(b, sandbox.HostConfig{}, nil)
			ctx := context.Background()
			var ph phases
			runCycles(b, conc, func() error {
				t0 := time.Now()
				sb, err := e.C.Create(ctx, harness.BusyboxCreate(""))
				if err != nil {
					return err
				}
				t1 := time.Now()
				var res execResult
				if err := e.C.Call(ctx, "POST", client.SandboxPath(sb.ID, "/exec"), map[string]any{"argv": []string{"true"}}, &res); err != nil {
					return err
				}
				t2 := time.Now()
				err = e.C.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
				ph.add(t1.Sub(t0), t2.Sub(t1), time.Since(t2))
				return err
			})
			ph.report(b)
		})
		b.Run(fmt.Sprintf("direct/c%d", conc), func(b *testing.B) {
			e := harness.NewServerEnv(b, sandbox.HostConfig{}, nil)
			ctx := context.Background()
			var ph phases
			runCycles(b, conc, func() error {
				t0 := time.Now()
				sb, err := e.Host.Create(ctx, sbx.Options{Rootfs: rootfs})
				if err != nil {
					return err
				}
				t1 := time.Now()
				if err := execOnSocket(ctx, sb.Socket); err != nil {
					return err
				}
				t2 := time.Now()
				err = e.Host.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
				ph.add(t1.Sub(t0), t2.Sub(t1), time.Since(t2))
				return err
			})
			ph.report(b)
		})
	}
}

// execOnSocket runs true through the executor's socket, without the server.
func execOnSocket(ctx context.Context, sock string) error {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://executor/v1/exec", bytes.NewReader([]byte(`{"argv":["true"]}`)))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("exec: HTTP %d", resp.StatusCode)
	}
	return nil
}

// runCycles runs b.N cycles on conc workers and reports the median and p99
// latency of one cycle in milliseconds.
func runCycles(b *testing.B, conc int, cycle func() error) {
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	next := make(chan struct{}, b.N)
	for range b.N {
		next <- struct{}{}
	}
	close(next)
	b.ResetTimer()
	var wg sync.WaitGroup
	var firstErr error
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				start := time.Now()
				err := cycle()
				d := time.Since(start)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "median-ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ms")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// phases collects the create, exec and delete parts of the cycles.
type phases struct {
	mu                    sync.Mutex
	create, exec, destroy []time.Duration
}

func (p *phases) add(c, e, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.create, p.exec, p.destroy = append(p.create, c), append(p.exec, e), append(p.destroy, d)
}

// report adds the median of each part.
func (p *phases) report(b *testing.B) {
	med := func(l []time.Duration) float64 {
		s := append([]time.Duration(nil), l...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2]) / float64(time.Millisecond)
	}
	if len(p.create) > 0 {
		b.ReportMetric(med(p.create), "create-ms")
		b.ReportMetric(med(p.exec), "exec-ms")
		b.ReportMetric(med(p.destroy), "delete-ms")
	}
}
