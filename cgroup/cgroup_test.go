package cgroup

import "testing"

func TestLimitsValidate(t *testing.T) {
	for _, l := range []Limits{{MemoryBytes: 1 << 20}, {CPUs: -1}, {CPUs: 0.001}, {Pids: -5}} {
		if l.Validate() == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	if err := (Limits{MemoryBytes: 64 << 20, CPUs: 0.5, Pids: 10}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestOCIResources(t *testing.T) {
	r := Limits{MemoryBytes: 64 << 20, CPUs: 1.5, Pids: 7}.OCIResources()
	if *r.Memory.Limit != 64<<20 || *r.CPU.Quota != 150000 || *r.CPU.Period != 100000 || *r.Pids.Limit != 7 {
		t.Errorf("resources %+v", r)
	}
	if SwapControllable() && (r.Memory.Swap == nil || *r.Memory.Swap != 64<<20) {
		t.Error("swap must be disabled (memory+swap equal to memory)")
	}
	if r := (Limits{}).OCIResources(); r.Memory != nil || r.CPU != nil || r.Pids != nil {
		t.Errorf("no limits: %+v", r)
	}
}

func TestDetectMode(t *testing.T) {
	if m := DetectMode(); m == ModeUnavailable {
		t.Fatal("no cgroup filesystem: sbx needs cgroups")
	}
	if _, err := Controllers(); err != nil {
		t.Fatal(err)
	}
}

func TestParentEnv(t *testing.T) {
	t.Setenv(ParentEnv, "")
	if Parent() != DefaultParent || ValidateParentEnv() != nil || SandboxPath("x") != "/sbx/x" {
		t.Errorf("unset: parent %q", Parent())
	}
	t.Setenv(ParentEnv, "sbx-test-1")
	if Parent() != "sbx-test-1" || ValidateParentEnv() != nil || SandboxPath("x") != "/sbx-test-1/x" {
		t.Errorf("set: parent %q", Parent())
	}
	for _, bad := range []string{"a/b", "..", "../x", "a b", "x\n"} {
		t.Setenv(ParentEnv, bad)
		if Parent() != DefaultParent || ValidateParentEnv() == nil {
			t.Errorf("%q: parent %q, accepted", bad, Parent())
		}
	}
}
