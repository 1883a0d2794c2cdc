package openhands_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

// BenchmarkOpenHandsStartToReady measures POST /start until GET
// /sessions/{id} says running/ready (the Agent Server answers /alive
// through sbx) for the Agent Server image, through a real sbx serve, one
// runtime at a time, stopping each. It reports the medians of the whole
// (start_to_ready_s), of the sandbox's create (sandbox_s: sbx's part, from
// the record's create timings) and of the rest (agent_boot_s: mostly the
// Agent Server's own Python start, the anchor sbx cannot shorten), and the
// p90 of the whole. Run it with -benchtime 10x.
func BenchmarkOpenHandsStartToReady(b *testing.B) { benchStartToReady(b, false) }

// BenchmarkOpenHandsStartToReadyPooled is the same with a warm pool of the
// Agent Server image (sbx pool create ... --network bridge IMAGE): every
// start claims a member that is ready before it (the fill is outside the
// timing).
func BenchmarkOpenHandsStartToReadyPooled(b *testing.B) { benchStartToReady(b, true) }

func benchStartToReady(b *testing.B, pooled bool) {
	e := newOHEnv(b, nil)
	ctx := context.Background()
	if pooled {
		if _, err := e.host.CreatePool(ctx, sbx.PoolSpec{Name: "openhands", Size: 1,
			Options: sbx.Options{Image: ohLocalImage, Network: sbx.NetworkBridge}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var total, sandbox, boot []time.Duration
	// Each start takes seconds: `make bench`'s 50x would take half an
	// hour, so at most 20 are run.
	for i := 0; i < min(b.N, 20); i++ {
		if pooled {
			b.StopTimer()
			if _, err := e.host.FillPool(ctx, "openhands"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		session := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)
		t0 := time.Now()
		code, rt := e.api(b, "POST", "/start", map[string]any{"image": e.image, "session_id": session,
			"command": "/usr/local/bin/openhands-agent-server --port 60000", "working_dir": "/workspace/project", "run_as_user": 10001, "run_as_group": 10001})
		if code != http.StatusOK {
			b.Fatalf("start: %d %v", code, rt)
		}
		var s map[string]any
		for {
			_, s = e.api(b, "GET", "/sessions/"+session, nil)
			if s["status"] == "running" {
				break
			}
			if s["status"] != "starting" {
				b.Fatalf("start: %v", s)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(t0)
		sb, err := e.host.Get(ctx, s["sandbox_id"].(string))
		if err != nil || sb.CreateTimings == nil {
			b.Fatalf("the runtime's sandbox: %v %v", sb, err)
		}
		if pooled != (sb.FromPool != "") {
			b.Fatalf("pooled %v, but the runtime's sandbox came from pool %q", pooled, sb.FromPool)
		}
		total = append(total, took)
		// sbx's part: the create (for a pooled start, the claim).
		ready := time.Duration(sb.CreateTimings.TotalS * float64(time.Second))
		sandbox = append(sandbox, ready)
		boot = append(boot, took-ready)
		e.api(b, "POST", "/stop", map[string]any{"runtime_id": rt["runtime_id"]})
	}
	b.ReportMetric(median(total).Seconds(), "start_to_ready_s")
	b.ReportMetric(median(sandbox).Seconds(), "sandbox_s")
	b.ReportMetric(median(boot).Seconds(), "agent_boot_s")
	sort.Slice(total, func(i, j int) bool { return total[i] < total[j] })
	b.ReportMetric(total[len(total)*9/10].Seconds(), "p90_s")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
