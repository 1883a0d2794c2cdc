package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestClusterHarness checks the cluster itself: both clients register on
// loopback with the sbx plugin fingerprinted healthy, a job with Nomad's
// own raw_exec driver spreads over both, and teardown leaves nothing.
func TestClusterHarness(t *testing.T) {
	c := startCluster(t, clusterOptions{})
	for _, a := range c.clients {
		n, _, err := c.api.Nodes().Info(a.nodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Attributes["driver.sbx"]; got != "1" {
			t.Errorf("%s: driver.sbx = %q, want 1", a.name, got)
		}
		if got := n.Attributes["unique.network.ip-address"]; got != "127.0.0.1" {
			t.Errorf("%s: node address %q, want 127.0.0.1", a.name, got)
		}
		for k := range n.Attributes {
			if strings.HasPrefix(k, "platform.aws") || strings.HasPrefix(k, "unique.platform") {
				t.Errorf("%s: cloud fingerprint ran: %s", a.name, k)
			}
		}
	}

	job := c.runJob(`
job "harness" {
  datacenters = ["dc1"]
  constraint {
    operator = "distinct_hosts"
    value    = "true"
  }
  group "g" {
    count = 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello from $NOMAD_ALLOC_INDEX; exec sleep 300"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}`)
	start := time.Now()
	allocs := c.waitRunning(job, 2, 120*time.Second)
	t.Logf("job running in %s", time.Since(start).Round(time.Millisecond))
	if allocs[0].NodeID == allocs[1].NodeID {
		t.Fatalf("distinct_hosts: both allocations on node %s", allocs[0].NodeID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range allocs {
		c.eventually(20*time.Second, "alloc logs", func() error {
			out, err := c.nomadCLI(ctx, "", "alloc", "logs", a.ID, "t")
			if err != nil || !strings.Contains(out, "hello from") {
				return errorf("nomad alloc logs: %v: %q", err, out)
			}
			return nil
		})
	}
}
