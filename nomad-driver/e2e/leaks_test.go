package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sbxrun/sbx/cgroup"
)

// sandboxRecord is the part of `sbx ls --format json` the tests read.
type sandboxRecord struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Pid      int    `json:"pid"`
	PidStart uint64 `json:"pid_start"`
	Spec     struct {
		Labels map[string]string `json:"labels"`
	} `json:"spec"`
	Network *struct {
		HostVeth string `json:"host_veth"`
	} `json:"network"`
}

// sbxCLI runs the sbx CLI on a client's sbx state.
func (c *cluster) sbxCLI(a *agent, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.sbx, append([]string{"--root", a.sbxRoot, "--run-root", a.sbxRunRoot}, args...)...)
	// The client's cgroup parent: sandboxes the CLI starts (a pool's
	// members) live where the plugin's do.
	cmd.Env = append(os.Environ(), a.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sandboxes lists every sandbox in a client's sbx root.
func (c *cluster) sandboxes(a *agent) ([]sandboxRecord, error) {
	if _, err := os.Stat(a.sbxRoot); os.IsNotExist(err) {
		return nil, nil // the plugin has not opened its state yet
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.sbx, "--root", a.sbxRoot, "--run-root", a.sbxRunRoot, "ls", "-a", "--format", "json")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sbx ls: %w: %s", err, stderrOf(err))
	}
	var sbs []sandboxRecord
	if err := json.Unmarshal(out, &sbs); err != nil {
		return nil, fmt.Errorf("sbx ls: %w: %s", err, out)
	}
	return sbs, nil
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func sandboxIDs(sbs []sandboxRecord) []string {
	var ids []string
	for _, sb := range sbs {
		ids = append(ids, sb.ID)
	}
	sort.Strings(ids)
	return ids
}

// process is a process found on the machine.
type process struct {
	pid int
	exe string
}

// processesUnder lists the processes whose executable lies under dir.
func processesUnder(dir string) []process {
	var out []process
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		if strings.HasPrefix(exe, dir+"/") {
			out = append(out, process{pid, exe})
		}
	}
	return out
}

// mountsUnder lists the mount points at or below any of roots, deepest
// first, as this process's mount namespace sees them.
func mountsUnder(roots ...string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, r := range roots {
			if r != "" && (mp == r || strings.HasPrefix(mp, r+"/")) {
				out = append(out, mp)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// missingNomadCgroups returns the cgroups a Nomad client creates (its
// "nomad" parent in each hierarchy) that do not exist yet, so teardown can
// remove exactly those.
func missingNomadCgroups() []string {
	var out []string
	for _, mp := range cgroup.Mountpoints() {
		p := filepath.Join(mp, "nomad.slice")
		if _, err := os.Stat(p); os.IsNotExist(err) {
			out = append(out, p)
		}
		p = filepath.Join(mp, "nomad")
		if _, err := os.Stat(p); os.IsNotExist(err) {
			out = append(out, p)
		}
	}
	return out
}

// nomadAllocCgroups lists the cgroups Nomad made for these allocations
// (v1: nomad/ALLOC.TASK, v2: nomad.slice/*/ALLOC.TASK.scope) in every
// hierarchy.
func nomadAllocCgroups(allocIDs []string) []string {
	if len(allocIDs) == 0 {
		return nil
	}
	var out []string
	for _, mp := range cgroup.Mountpoints() {
		for _, parent := range []string{"nomad", "nomad.slice"} {
			_ = filepath.WalkDir(filepath.Join(mp, parent), func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				for _, id := range allocIDs {
					if strings.HasPrefix(d.Name(), id+".") {
						out = append(out, p)
						return filepath.SkipDir
					}
				}
				return nil
			})
		}
	}
	return out
}

// killCgroup SIGKILLs every process in a cgroup and its children and
// returns their PIDs.
func killCgroup(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes the cgroup trees in paths, deepest first; a
// cgroup that still holds processes stays (and rmdir says so).
func removeCgroups(paths []string) []string {
	var failed []string
	for _, root := range paths {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			err := os.Remove(d)
			for i := 0; err != nil && errors.Is(err, syscall.EBUSY) && i < 20; i++ {
				time.Sleep(50 * time.Millisecond) // killed processes leave
				err = os.Remove(d)
			}
			if err != nil && !os.IsNotExist(err) {
				failed = append(failed, fmt.Sprintf("cgroup %s: %v", d, err))
			}
		}
	}
	return failed
}

// parentCgroups are the directories of an sbx cgroup parent in every
// hierarchy.
func parentCgroups(parent string) []string {
	if parent == "" {
		return nil
	}
	var out []string
	for _, mp := range cgroup.Mountpoints() {
		out = append(out, filepath.Join(mp, parent))
	}
	return out
}

// sandboxCgroups lists the sandbox cgroups under an sbx cgroup parent, in
// every hierarchy.
func sandboxCgroups(parent string) []string {
	var out []string
	for _, p := range parentCgroups(parent) {
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, filepath.Join(p, e.Name()))
			}
		}
	}
	return out
}

// leftovers lists what a client's sbx left on the host: sandboxes in its
// state, cgroups (and processes) under its cgroup parent, mounts under its
// sbx roots and Nomad's allocation directory, and the veths of the
// sandboxes in seen.
func (c *cluster) leftovers(a *agent, seen []sandboxRecord) []string {
	var out []string
	sbs, err := c.sandboxes(a)
	if err != nil {
		out = append(out, fmt.Sprintf("list sandboxes: %v", err))
	}
	for _, sb := range sbs {
		out = append(out, fmt.Sprintf("sandbox %s (%s)", sb.ID, sb.Status))
	}
	for _, cg := range sandboxCgroups(a.cgroupParent) {
		procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		out = append(out, fmt.Sprintf("cgroup %s (processes: %q)", cg, strings.TrimSpace(string(procs))))
	}
	for _, m := range mountsUnder(a.sbxRoot, a.sbxRunRoot, filepath.Join(a.dir, "alloc")) {
		out = append(out, "mount "+m)
	}
	for _, sb := range seen {
		if sb.Network != nil && sb.Network.HostVeth != "" && c.linkExists(sb.Network.HostVeth) {
			out = append(out, fmt.Sprintf("sandbox %s: veth %s", sb.ID, sb.Network.HostVeth))
		}
		if sb.Pid > 0 && processAlive(sb.Pid, sb.PidStart) {
			out = append(out, fmt.Sprintf("sandbox %s: PID 1 %d still runs", sb.ID, sb.Pid))
		}
	}
	return out
}

// processAlive reports whether pid runs and started at start (clock ticks
// after boot, field 22 of /proc/PID/stat), so that a reused PID does not
// count. A zombie (Z) or a process being reaped (X) has ended.
func processAlive(pid int, start uint64) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return false
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return false
	}
	got, _ := strconv.ParseUint(fields[19], 10, 64)
	return start == 0 || got == start
}

// linkExists reports whether a network link exists where the sandboxes'
// host side is: the cluster's stand-in namespace, or the machine's own.
func (c *cluster) linkExists(name string) bool {
	if c.netns == "" {
		_, err := os.Stat(filepath.Join("/sys/class/net", name))
		return err == nil
	}
	return exec.Command("ip", "-n", c.netns, "link", "show", "dev", name).Run() == nil
}
