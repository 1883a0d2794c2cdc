package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// SandboxLeftovers lists the directories sandbox id still has in the
// hierarchies, deepest first as RemovePaths wants them. Unlike Leftovers,
// which lists every sandbox under the parent, it looks only at id's own
// directory in each hierarchy, so a removal costs the same with one
// sandbox on the host or a thousand.
func SandboxLeftovers(id string) []string {
	var out []string
	for _, d := range SandboxDirs(id) {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// OOMKills returns how many processes of sandbox id the kernel's OOM
// killer has killed (memory.oom_control on v1, memory.events on v2). It
// reads that one file, where Usage reads every statistic of every
// hierarchy; it fails when the sandbox's memory cgroup is gone.
func OOMKills(id string) (uint64, error) {
	file := filepath.Join(Root, SandboxPath(id), "memory.events")
	if DetectMode() != ModeV2 {
		file = ""
		for mp, dir := range SandboxDirs(id) {
			for _, c := range strings.Split(filepath.Base(mp), ",") {
				if c == "memory" {
					file = filepath.Join(dir, "memory.oom_control")
				}
			}
		}
		if file == "" {
			return 0, errors.New("no memory cgroup hierarchy on this host")
		}
	}
	if _, err := os.Stat(file); err != nil {
		return 0, fmt.Errorf("OOM kills of sandbox %s: %w", id, err)
	}
	return readKey(file, "oom_kill"), nil
}
