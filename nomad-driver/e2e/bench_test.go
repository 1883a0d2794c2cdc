package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/tests/fixture"
)

// BenchmarkJobRunCount10 measures `nomad job run` of a count = 10 job
// until all ten allocations run, with the sbx driver and with Nomad's exec
// driver on the same cluster (2 clients), and the sbx plugin's memory per
// running task. Run it with -benchtime 5x: each iteration is one job run
// (after an untimed warm-up), and the median is reported.
//
//	go test -tags 'seccomp netgo osusergo' -run '^$' -bench JobRunCount10 -benchtime 5x ./e2e/
func BenchmarkJobRunCount10(b *testing.B) {
	reg := fixture.StartRegistry(b)
	image := reg.Push(b, "e2e/busybox:1", fixture.BusyboxImage(b))
	// Nomad's exec driver builds a chroot per task from chroot_env (by
	// default /bin, /etc, /lib*, /sbin and /usr of the host: minutes per
	// task on this machine); it gets the same busybox as the sbx tasks.
	busybox := fixture.BusyboxRootfs(b)
	c := startCluster(b, clusterOptions{
		pluginConfig: fmt.Sprintf(`    insecure_registries = [%q]`, reg.Host),
		clientConfig: fmt.Sprintf(`  chroot_env = { %q = "/bin" }`, filepath.Join(busybox, "bin")),
	})

	sbxJob := func(id string) string {
		return fmt.Sprintf(`
job %q {
  datacenters = ["dc1"]
  group "g" {
    count = 10
    task "t" {
      driver = "sbx"
      config {
        image   = %q
        command = "/bin/sleep"
        args    = ["3600"]
      }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}`, id, image)
	}
	execJob := func(id string) string {
		return fmt.Sprintf(`
job %q {
  datacenters = ["dc1"]
  group "g" {
    count = 10
    task "t" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}`, id)
	}

	b.Run("sbx", func(b *testing.B) {
		c := c.with(b)
		runJobs(b, c, sbxJob)
		// The plugin's memory per running task: its RSS with ten tasks
		// against none.
		idle := pluginRSS(c)
		id := c.runJob(sbxJob("mem"))
		c.waitRunning(id, 10, 5*time.Minute)
		time.Sleep(3 * time.Second) // let log forwarders and stats settle
		busy := pluginRSS(c)
		b.ReportMetric(float64(busy-idle)/10/1024, "KiB-plugin-rss/task")
		b.Logf("plugin RSS (all clients): %d KiB idle, %d KiB with 10 tasks", idle/1024, busy/1024)
		// What each task's sandbox holds (executor, task, page cache of
		// its writable layer), from its memory cgroup.
		mem, n := sandboxMemory(b, c)
		if n != 10 {
			b.Fatalf("%d running sandboxes, want 10", n)
		}
		b.ReportMetric(float64(mem)/10/(1<<20), "MiB-sandbox-mem/task")
		if err := c.purgeAll(5 * time.Minute); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("exec", func(b *testing.B) { runJobs(b, c.with(b), execJob) })
}

// runJobs times b.N job runs to all allocations running, after one untimed
// warm-up, purging each job before the next, and reports the median.
func runJobs(b *testing.B, c *cluster, job func(id string) string) {
	c.waitRunning(c.runJob(job("warmup")), 10, 5*time.Minute)
	if err := c.purgeAll(5 * time.Minute); err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		id := c.runJob(job(fmt.Sprintf("bench%d", i)))
		c.waitRunning(id, 10, 5*time.Minute)
		times = append(times, time.Since(start))
		b.StopTimer()
		if err := c.purgeAll(5 * time.Minute); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(times)
	median := times[len(times)/2]
	b.ReportMetric(median.Seconds(), "s-median")
	b.ReportMetric(0, "ns/op")
	b.Logf("job run to 10 allocations running: %v (median %v)", times, median)
}

// with returns the cluster bound to another test or benchmark.
func (c *cluster) with(t testing.TB) *cluster {
	n := *c
	n.t = t
	return &n
}

// pluginRSS is the summed resident memory of the clients' sbx plugins, in
// bytes.
func pluginRSS(c *cluster) int64 {
	var total int64
	for _, p := range processesUnder(c.plugins) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				total += kb * 1024
			}
		}
	}
	return total
}

// sandboxMemory sums the cgroup memory of the clients' running sandboxes
// and counts them.
func sandboxMemory(b *testing.B, c *cluster) (total int64, n int) {
	for _, a := range c.clients {
		sbs, err := c.sandboxes(a)
		if err != nil {
			b.Fatal(err)
		}
		for _, sb := range sbs {
			if sb.Status != "running" {
				continue
			}
			out, err := c.sbxCLI(a, "stats", sb.ID, "--no-stream", "--format", "json")
			var u struct {
				MemoryCurrentBytes int64 `json:"memory_current_bytes"`
			}
			if err != nil || json.Unmarshal([]byte(out), &u) != nil {
				b.Fatalf("sbx stats %s: %v: %s", sb.ID, err, out)
			}
			total += u.MemoryCurrentBytes
			n++
		}
	}
	return total, n
}
