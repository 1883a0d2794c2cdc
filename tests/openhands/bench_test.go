package openhands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
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
	b.ReportMetric(p90(total).Seconds(), "p90_s")
}

// p90 is the 90th percentile of d by nearest rank (of 10, the 9th).
func p90(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*9+9)/10-1]
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkOpenHandsWarmStart measures POST /start until the first
// authenticated Agent Server call (GET /api/conversations/search with the
// session key, through the data plane) succeeds: 10 starts from a warm
// shape with 2 dormant Agent Servers (sbx serve --openhands-warm 2; each
// start waits, outside the timing, until a member is ready: refills
// between starts), then, in the same run, 10 cold starts of a shape that
// is not kept warm (another working directory), taken with the pool full
// so that no refill competes with them. It reports the medians
// (warm_p50_s, cold_p50_s), the p90s, their ratio and the latest refill
// (a dormant boot). The counts are fixed (each start takes seconds to
// minutes of boots): run it with -benchtime 1x.
func BenchmarkOpenHandsWarmStart(b *testing.B) {
	shape := map[string]any{"name": "bench", "image": ohAskedImage, "command": "/usr/local/bin/openhands-agent-server --port 60000",
		"working_dir": "/workspace/project", "run_as_user": 10001, "run_as_group": 10001, "environment": map[string]string{"OH_ENABLE_VNC": "0", "LOG_JSON": "true"}}
	data, _ := json.Marshal(map[string]any{"configs": []any{shape}})
	f, err := os.CreateTemp("", "sbxoh-bench-*.json")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.Write(data)
	f.Close()
	e := newOHEnv(b, nil, "--openhands-warm", "2", "--openhands-warm-learn", "0", "--openhands-warm-config", f.Name())
	start := func(session, workdir string, env map[string]string) time.Duration {
		req := map[string]any{"image": e.image, "session_id": session, "command": shape["command"], "working_dir": workdir,
			"run_as_user": 10001, "run_as_group": 10001, "environment": env}
		t0 := time.Now()
		code, rt := e.api(b, "POST", "/start", req)
		if code != http.StatusOK {
			b.Fatalf("start: %d %v", code, rt)
		}
		for deadline := t0.Add(10 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if code, _ := e.agentCall(b, rt, "GET", "/api/conversations/search", rt["session_api_key"].(string)); code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("session %s: no authenticated answer within 10 minutes", session)
			}
		}
		took := time.Since(t0)
		e.api(b, "POST", "/stop", map[string]any{"runtime_id": rt["runtime_id"]})
		return took
	}
	ready := func(n int) {
		e.waitWarm(b, 15*time.Minute, "the warm shape's members", func(c map[string]warmConfig) bool { return c["bench"].Warm.Ready >= n })
	}
	// LLM_API_KEY is a per-session variable: it goes to /api/init and does
	// not change the shape.
	env := func(i int) map[string]string {
		return map[string]string{"OH_ENABLE_VNC": "0", "LOG_JSON": "true", "LLM_API_KEY": fmt.Sprintf("key-%d", i)}
	}
	b.ResetTimer()
	var warm, cold []time.Duration
	for i := 0; i < 10; i++ {
		b.StopTimer()
		ready(1)
		b.StartTimer()
		warm = append(warm, start(fmt.Sprintf("bench-warm-%d", i), "/workspace/project", env(i)))
		fmt.Fprintf(os.Stderr, "warm start %d: %.3fs (load %s)\n", i+1, warm[i].Seconds(), loadavg())
	}
	for i := 0; i < 10; i++ {
		b.StopTimer()
		ready(2)
		b.StartTimer()
		cold = append(cold, start(fmt.Sprintf("bench-cold-%d", i), "/workspace/cold", env(i)))
		fmt.Fprintf(os.Stderr, "cold start %d: %.2fs (load %s)\n", i+1, cold[i].Seconds(), loadavg())
	}
	w := e.warmConfigsOf(b, e.url)["bench"].Warm // the path-mode listener's starts
	if w.Hits != len(warm) || w.InitFailures != 0 {
		b.Fatalf("warm starts: %+v", w)
	}
	b.ReportMetric(median(warm).Seconds(), "warm_p50_s")
	b.ReportMetric(median(cold).Seconds(), "cold_p50_s")
	b.ReportMetric(p90(warm).Seconds(), "warm_p90_s")
	b.ReportMetric(p90(cold).Seconds(), "cold_p90_s")
	b.ReportMetric(median(cold).Seconds()/median(warm).Seconds(), "cold/warm")
	b.ReportMetric(w.LastBootS, "last_refill_s")
}

// loadavg is the machine's load (its progress lines say it).
func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
