// Command churncpu runs create+remove cycles of idle sandboxes in-process
// (sandbox.Host.Create until the executor answers, then Remove), N at a
// time like sbx bench's churn scenario, and prints the rate and the CPU
// time per cycle of the process itself (the host side: libcontainer's
// parent, mounts, cgroups, state, removal) and of its children (the init
// stage, the executor), from getrusage. CPU per cycle is what bounds
// churn on a machine with few cores, and it is far less disturbed by
// other load than the rate is. It needs root; see docs/bench.md.
//
//	go run -tags 'seccomp netgo osusergo' ./bench/trace/churncpu [-n 24] [-c 4] [-rootfs DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

func main() {
	sandbox.Init() // first: the program is re-executed to set sandboxes up
	rootfs := flag.String("rootfs", "/var/cache/sbx-bench/busybox", "root file system of the sandboxes (sbx bench builds this one)")
	n := flag.Int("n", 24, "measured cycles")
	c := flag.Int("c", 4, "cycles at a time")
	flag.Parse()
	if err := run(*rootfs, *n, *c); err != nil {
		fmt.Fprintln(os.Stderr, "churncpu:", err)
		os.Exit(1)
	}
}

func run(rootfs string, n, c int) (err error) {
	dir, err := os.MkdirTemp("", "sbx-churncpu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	runRoot := fmt.Sprintf("/run/sbx-churncpu-%d", os.Getpid())
	defer os.RemoveAll(runRoot)
	h, err := sandbox.Open(sandbox.HostConfig{Root: filepath.Join(dir, "root"), RunRoot: runRoot, Pull: sbx.PullNever})
	if err != nil {
		return err
	}
	defer func() {
		if _, gerr := h.GC(context.Background()); gerr != nil && err == nil {
			err = gerr
		}
		h.Close()
	}()
	ctx := context.Background()
	cycle := func() error {
		sb, err := h.Create(ctx, sbx.Options{Rootfs: rootfs})
		if err != nil {
			return err
		}
		return h.Remove(ctx, sb.ID, sbx.RemoveOptions{Force: true})
	}
	for range 4 { // warm-up: helper binaries, filter cache
		if err := cycle(); err != nil {
			return err
		}
	}
	self0, kids0 := cpu()
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	errc := make(chan error, c)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if err := cycle(); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	self1, kids1 := cpu()
	per := func(a, b time.Duration) float64 { return float64(b-a) / float64(time.Millisecond) / float64(n) }
	fmt.Printf("%d cycles c=%d: %.1f/s; CPU per cycle: self %.2f ms, children %.2f ms, total %.2f ms\n",
		n, c, float64(n)/d.Seconds(), per(self0, self1), per(kids0, kids1), per(self0+kids0, self1+kids1))
	return nil
}

// cpu returns the user+system time of this process and of its reaped
// children.
func cpu() (self, children time.Duration) {
	get := func(who int) time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(who, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return get(syscall.RUSAGE_SELF), get(syscall.RUSAGE_CHILDREN)
}
