package isolate

import (
	"slices"
	"testing"
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
