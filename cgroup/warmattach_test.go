package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/internal/roottest"
)

// The warming move names the cgroup this process is in, in a hierarchy
// mounted below Root, and leaves the process where it was.
func TestWarmAttachMovesNothing(t *testing.T) {
	roottest.Require(t, "it writes a cgroup.procs file")
	path := ownProcsFile()
	if path == "" {
		t.Fatal("no cgroup.procs of this process's own cgroup found below " + Root)
	}
	if !slices.ContainsFunc(Mountpoints(), func(mp string) bool { return strings.HasPrefix(path, mp+"/") }) {
		t.Fatalf("%s is below none of the cgroup mountpoints %q", path, Mountpoints())
	}
	before, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	warmAttach()
	t.Logf("%s: the move took %v", path, time.Since(t0))
	after, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("the process moved:\n%s\nbecame\n%s", before, after)
	}
	procs, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(os.Getpid())) {
		t.Fatalf("%s no longer lists this process", filepath.Clean(path))
	}
}
