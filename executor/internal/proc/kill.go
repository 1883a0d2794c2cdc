package proc

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SignalSession sends sig to every process whose session id is sid (a
// shell session and all its jobs, in the foreground or background). It
// returns how many processes it signalled.
func SignalSession(sid int, sig unix.Signal) int {
	n := 0
	for _, pid := range pidsWhere(func(stat []byte) bool { return statField(stat, 6) == sid }) {
		if unix.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}

// pidsWhere lists the pids in /proc whose stat line satisfies match.
func pidsWhere(match func(stat []byte) bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		if match(stat) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// statField returns numeric field n (1-based, as in proc(5)) of a
// /proc/PID/stat line, or -1. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func statField(stat []byte, n int) int {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || n < 3 {
		return -1
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < n-2 {
		return -1
	}
	v, err := strconv.Atoi(string(fields[n-3]))
	if err != nil {
		return -1
	}
	return v
}

// HasChildren reports whether this process has any child left, running or
// not yet reaped.
func HasChildren() bool {
	self := os.Getpid()
	return len(pidsWhere(func(stat []byte) bool { return statField(stat, 4) == self })) > 0
}
