// Package oomscore makes the commands that sbx's init and executor start
// likelier OOM victims than the init itself: under a small memory limit
// the kernel should kill the command, not the sandbox's PID 1 (whose
// static binary is the larger process in a small sandbox).
package oomscore

import (
	"os"
	"strconv"
	"strings"
)

// Boost is added to the caller's own oom_score_adj for its commands.
const Boost = 500

// Own returns the calling process's oom_score_adj.
func Own() int {
	data, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// Value is the oom_score_adj for the caller's commands.
func Value() int { return min(Own()+Boost, 1000) }

// Raise sets pid's oom_score_adj to Value. Raising needs no privilege;
// failures are ignored (the process may already be gone).
func Raise(pid int) {
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(Value())), 0)
}
