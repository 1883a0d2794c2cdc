package openhands_test

import (
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"
)

// BenchmarkOpenHandsStartToReady measures POST /start until GET
// /sessions/{id} says running/ready (the Agent Server answers /alive
// through sbx) for the Agent Server image, one runtime at a time, stopping
// each. Run it with -benchtime 10x; it reports the median and p90.
func BenchmarkOpenHandsStartToReady(b *testing.B) {
	e := newOHEnv(b, nil, nil)
	b.ResetTimer()
	var took []time.Duration
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
		for {
			_, s := e.api(b, "GET", "/sessions/"+session, nil)
			if s["status"] == "running" {
				break
			}
			if s["status"] != "starting" {
				b.Fatalf("start: %v", s)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took = append(took, time.Since(t0))
		e.api(b, "POST", "/stop", map[string]any{"runtime_id": rt["runtime_id"]})
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(took[len(took)/2].Seconds(), "median_s")
	b.ReportMetric(took[len(took)*9/10].Seconds(), "p90_s")
}
