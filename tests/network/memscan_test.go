package network

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// scanMemory reports which processes of pids hold needle in a readable
// mapping of their memory, read from the host through /proc/PID/mem.
func scanMemory(t *testing.T, pids []int, needle []byte) []string {
	t.Helper()
	var found []string
	for _, pid := range pids {
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatalf("read maps of %d: %v", pid, err)
		}
		mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err != nil {
			t.Fatalf("open mem of %d: %v", pid, err)
		}
		scanned := 0
		for _, line := range strings.Split(string(maps), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || fields[1][0] != 'r' || strings.Contains(line, "[vvar") || strings.Contains(line, "[vsyscall]") {
				continue
			}
			lo, hi, _ := strings.Cut(fields[0], "-")
			start, _ := strconv.ParseUint(lo, 16, 64)
			end, _ := strconv.ParseUint(hi, 16, 64)
			if end-start > 1<<30 {
				continue
			}
			buf := make([]byte, end-start)
			n, _ := mem.ReadAt(buf, int64(start))
			scanned += n
			if bytes.Contains(buf[:n], needle) {
				found = append(found, fmt.Sprintf("pid %d at %s %s", pid, fields[0], strings.Join(fields[5:], " ")))
			}
		}
		mem.Close()
		if scanned == 0 {
			t.Fatalf("read nothing of pid %d's memory", pid)
		}
	}
	return found
}

// sandboxPIDs are the processes in the PID namespace of the process whose
// environment holds marker.
func sandboxPIDs(t *testing.T, marker string) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	pidNS := ""
	nsOf := func(pid string) string { l, _ := os.Readlink("/proc/" + pid + "/ns/pid"); return l }
	for _, e := range entries {
		if env, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && bytes.Contains(env, []byte(marker)) {
			if ns := nsOf(e.Name()); ns != nsOf("self") {
				pidNS = ns
				break
			}
		}
	}
	if pidNS == "" {
		t.Fatalf("no sandbox process has %s in its environment", marker)
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && nsOf(e.Name()) == pidNS {
			pids = append(pids, pid)
		}
	}
	return pids
}
