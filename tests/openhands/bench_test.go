package openhands_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"
)

// BenchmarkOpenHandsStartToReady measures POST /start until GET
// /sessions/{id} says running/ready (the Agent Server answers /alive
// through sbx) for the Agent Server image, through a real sbx serve, one
// runtime at a time, stopping each. It reports the medians of the whole
// (start_to_ready_s), of the part until the sandbox ran with its executor
// answering (sandbox_s: image check, create, network) and of the rest
// (agent_boot_s: the Agent Server's own Python start, the anchor sbx cannot
// shorten), and the p90 of the whole. Run it with -benchtime 10x.
func BenchmarkOpenHandsStartToReady(b *testing.B) {
	e := newOHEnv(b, nil)
	b.ResetTimer()
	var total, sandbox, boot []time.Duration
	// Each start takes seconds: `make bench`'s 50x would take half an
	// hour, so at most 20 are run.
	for i := 0; i < min(b.N, 20); i++ {
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
		sb, err := e.host.Get(context.Background(), s["sandbox_id"].(string))
		if err != nil || sb.Started == nil {
			b.Fatalf("the runtime's sandbox: %v %v", sb, err)
		}
		total = append(total, took)
		sandbox = append(sandbox, sb.Started.Sub(t0))
		boot = append(boot, took-sb.Started.Sub(t0))
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
