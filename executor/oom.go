package executor

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/sbxrun/sbx/executor/api"
)

// oomCountFiles hold the sandbox's OOM kill count as the sandbox sees its
// own cgroup at /sys/fs/cgroup: memory.events on cgroup v2,
// memory.oom_control of the memory hierarchy on v1 and hybrid hosts.
var oomCountFiles = []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"}

// oomKills returns the sandbox's OOM kill count, and false when no
// cgroup file tells it.
func oomKills() (uint64, bool) {
	for _, p := range oomCountFiles {
		if n, ok := readOOMKill(p); ok {
			return n, true
		}
	}
	return 0, false
}

// readOOMKill reads the "oom_kill N" line of a memory.events or
// memory.oom_control file.
func readOOMKill(path string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// oomWatch is the OOM kill count when a command started.
type oomWatch struct {
	before uint64
	ok     bool
}

func watchOOM() oomWatch {
	n, ok := oomKills()
	return oomWatch{before: n, ok: ok}
}

// note sets res.OOMKilled when the command died of SIGKILL, not at its
// timeout, and the sandbox's OOM kill count rose while it ran.
func (w oomWatch) note(res api.ExecResult) api.ExecResult {
	if w.ok && res.Signal == "SIGKILL" && !res.TimedOut {
		if n, ok := oomKills(); ok && n > w.before {
			res.OOMKilled = true
		}
	}
	return res
}
