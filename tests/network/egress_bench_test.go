package network

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// BenchmarkEgressLatency measures, from inside bridged sandboxes, the
// median time of an HTTPS GET to a fake-internet site on a new
// connection (conn-ms) and on a kept-alive one (req-ms): directly (NAT,
// the default policy), through the egress proxy's passthrough (--egress
// by name), and decrypted by it (a secret bound to the host). Each
// iteration runs 50 GETs of each kind inside one sandbox.
func BenchmarkEgressLatency(b *testing.B) {
	e := harness.NewEgressCLI(b)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"direct", nil},
		{"passthrough", []string{"--egress", "api.test"}},
		{"decrypted", []string{"--egress", "api.test", "--secret", "K@api.test"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			args := append([]string{"create", "--network", "bridge", "--dns", "203.0.113.53", "--rootfs", e.Root}, c.args...)
			out, err := e.Sbx([]string{"K=v"}, args...)
			if err != nil {
				b.Fatalf("create: %v\n%s", err, out)
			}
			id := strings.TrimSpace(out)
			defer e.Sbx(nil, "rm", "-f", id)
			var conn, req float64
			for range b.N {
				out, err := e.Sbx(nil, "exec", id, "/egressprobe", "bench", "50", "https://api.test/", "/fake-ca.pem")
				m := regexp.MustCompile(`conn_ms=([0-9.]+) req_ms=([0-9.]+)`).FindStringSubmatch(out)
				if err != nil || m == nil {
					b.Fatalf("bench probe: %v\n%s", err, out)
				}
				c, _ := strconv.ParseFloat(m[1], 64)
				r, _ := strconv.ParseFloat(m[2], 64)
				conn, req = conn+c, req+r
			}
			b.ReportMetric(conn/float64(b.N), "conn-ms")
			b.ReportMetric(req/float64(b.N), "req-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
