// Command attachgap times moving a process into a fresh cgroup after a
// pause since the previous move, to show the RCU grace period that the
// kernel's cgroup_threadgroup_rwsem waits for when no move happened within
// the last one (see docs/bench.md); then, after a long pause, what
// cgroup.WarmAttach (a start's no-op move of its own process, in the
// background) buys a move made some milliseconds after it, as a start's
// set-up work comes between the two. It needs root.
//
//	go run ./bench/trace/attachgap [CGROUP_DIR]
//
// CGROUP_DIR is where it makes its cgroups: /sys/fs/cgroup/pids on v1 and
// hybrid hosts (the default), /sys/fs/cgroup on v2.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/sbxrun/sbx/cgroup"
)

func main() {
	parent := "/sys/fs/cgroup/pids"
	if len(os.Args) > 1 {
		parent = os.Args[1]
	}
	base := filepath.Join(parent, "sbx-attachgap-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(base, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "attachgap:", err)
		os.Exit(1)
	}
	defer os.Remove(base)
	for _, gap := range []time.Duration{0, 1, 2, 4, 8, 16, 32, 64} {
		gap *= time.Millisecond
		var ds []time.Duration
		for i := 0; i < 25; i++ {
			d, err := moveOnce(filepath.Join(base, strconv.Itoa(i)), gap)
			if err != nil {
				fmt.Fprintln(os.Stderr, "attachgap:", err)
				return
			}
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		fmt.Printf("pause %-5v before the move: p10 %-10v p50 %-10v p90 %v\n", gap,
			ds[2].Round(time.Microsecond), ds[12].Round(time.Microsecond), ds[22].Round(time.Microsecond))
	}
	for _, warm := range []time.Duration{-1, 0, 1, 2, 4, 8} {
		var ds []time.Duration
		for i := 0; i < 25; i++ {
			d, err := warmedMove(filepath.Join(base, strconv.Itoa(i)), warm*time.Millisecond)
			if err != nil {
				fmt.Fprintln(os.Stderr, "attachgap:", err)
				return
			}
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		what := "no WarmAttach"
		if warm >= 0 {
			what = fmt.Sprintf("WarmAttach %v before", warm*time.Millisecond)
		}
		fmt.Printf("pause 64ms, %-22s the move: p10 %-10v p50 %-10v p90 %v\n", what,
			ds[2].Round(time.Microsecond), ds[12].Round(time.Microsecond), ds[22].Round(time.Microsecond))
	}
}

// warmedMove is moveOnce after a 64 ms pause with, unless warm is
// negative, cgroup.WarmAttach called warm before the timed move.
func warmedMove(dir string, warm time.Duration) (time.Duration, error) {
	time.Sleep(64 * time.Millisecond)
	if warm < 0 {
		return moveOnce(dir, 0)
	}
	cgroup.WarmAttach()
	return moveOnce(dir, warm)
}

// moveOnce starts a sleeping process, waits gap, and times writing its pid
// into the cgroup dir, which it creates and removes.
func moveOnce(dir string, gap time.Duration) (time.Duration, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	defer os.Remove(dir)
	c := exec.Command("/bin/sleep", "10")
	if err := c.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	time.Sleep(gap)
	t0 := time.Now()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(c.Process.Pid)), 0); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}
