package isolate

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sbxrun/sbx/cgroup"
)

func TestCapabilities(t *testing.T) {
	caps, err := Capabilities(nil, nil)
	if err != nil || len(caps) != len(DefaultCapabilities) {
		t.Fatalf("default set: %v %v", caps, err)
	}
	caps, _ = Capabilities([]string{"sys_admin"}, []string{"CAP_NET_RAW"})
	if !slices.Contains(caps, "CAP_SYS_ADMIN") || slices.Contains(caps, "CAP_NET_RAW") {
		t.Errorf("add/drop: %v", caps)
	}
	caps, _ = Capabilities([]string{"KILL"}, []string{"ALL"})
	if !slices.Equal(caps, []string{"CAP_KILL"}) {
		t.Errorf("drop ALL, add KILL: %v", caps)
	}
	if _, err := Capabilities([]string{"CAP_BOGUS"}, nil); err == nil {
		t.Error("unknown capability accepted")
	}
}

func TestSpecValidation(t *testing.T) {
	for _, s := range []*Spec{
		{Rootfs: "/", Args: []string{"true"}},                      // no ID
		{ID: "x", Args: []string{"true"}},                          // no root
		{ID: "x", Rootfs: "/", Args: []string{"true"}, Cwd: "rel"}, // relative cwd
		{ID: "x", Rootfs: "/", Args: []string{"true"}, Network: "/nonexistent/netns"},
	} {
		if _, err := s.oci(false); err == nil {
			t.Errorf("spec %+v accepted", s)
		}
	}
}

// TestCgroupMounts checks the sandbox's view of its cgroups on each kind
// of host: one bind on pure v2; on hybrid hosts one bind of a prepared
// view, or else a tmpfs with a bind per viewed hierarchy; always read-only.
func TestCgroupMounts(t *testing.T) {
	const id = "sb1"
	v2 := []string{"/sys/fs/cgroup"}
	hybrid := []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/devices",
		"/sys/fs/cgroup/pids", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"}
	dests := func(ms []specs.Mount) (out []string) {
		for _, m := range ms {
			out = append(out, m.Type+" "+m.Source+" "+m.Destination)
			if !slices.Contains(m.Options, "ro") || !slices.Contains(m.Options, "nosuid") || !slices.Contains(m.Options, "noexec") {
				t.Errorf("mount %s is not read-only, nosuid and noexec: %v", m.Destination, m.Options)
			}
		}
		return out
	}
	sandboxDir := "/sys/fs/cgroup" + cgroup.SandboxPath(id)
	for _, c := range []struct {
		name string
		view string
		mps  []string
		want []string
	}{
		{"pure v2", "", v2, []string{"bind " + sandboxDir + " /sys/fs/cgroup"}},
		{"pure v2 with a view", "/run/view", v2, []string{"bind " + sandboxDir + " /sys/fs/cgroup"}},
		{"hybrid with a view", "/run/view", hybrid, []string{"bind /run/view /sys/fs/cgroup"}},
		{"hybrid", "", hybrid, []string{
			"tmpfs tmpfs /sys/fs/cgroup",
			"bind /sys/fs/cgroup/cpu,cpuacct" + cgroup.SandboxPath(id) + " /sys/fs/cgroup/cpu,cpuacct",
			"bind /sys/fs/cgroup/memory" + cgroup.SandboxPath(id) + " /sys/fs/cgroup/memory",
			"bind /sys/fs/cgroup/pids" + cgroup.SandboxPath(id) + " /sys/fs/cgroup/pids",
		}},
	} {
		s := &Spec{ID: id, CgroupView: c.view}
		if got := dests(s.cgroupMounts(false, c.mps)); !slices.Equal(got, c.want) {
			t.Errorf("%s: mounts\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
	s := &Spec{ID: id, CgroupView: "/run/view"}
	if got := dests(s.cgroupMounts(true, hybrid)); !slices.Equal(got, []string{"cgroup cgroup /sys/fs/cgroup"}) {
		t.Errorf("portable: %q", got)
	}
}

// TestDevMount checks /dev: a bind of a prepared /dev when the spec has
// one (libcontainer then makes no nodes), else Docker's tmpfs; portable
// specs for other runtimes always get the tmpfs.
func TestDevMount(t *testing.T) {
	dev := func(s *Spec, portable bool) specs.Mount {
		for _, m := range s.kernelMounts(portable) {
			if m.Destination == "/dev" {
				return m
			}
		}
		t.Fatal("no /dev mount")
		return specs.Mount{}
	}
	if m := dev(&Spec{Dev: "/run/x/dev"}, false); m.Type != "bind" || m.Source != "/run/x/dev" || !slices.Contains(m.Options, "nosuid") {
		t.Errorf("prepared /dev: %+v", m)
	}
	if m := dev(&Spec{Dev: "/run/x/dev"}, true); m.Type != "tmpfs" {
		t.Errorf("portable spec with a prepared /dev: %+v", m)
	}
	if m := dev(&Spec{}, false); m.Type != "tmpfs" {
		t.Errorf("no prepared /dev: %+v", m)
	}
}
