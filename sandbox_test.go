package sbx

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSandboxState checks the docker state of each kind of sandbox, what
// the status filters select, and that JSON carries the state.
func TestSandboxState(t *testing.T) {
	withCmd := Options{Cmd: []string{"sleep", "1"}}
	stopped := time.Unix(100, 0)
	five := 5
	cases := []struct {
		name  string
		sb    Sandbox
		state Status
		// selected by ps (Running), status=running, status=exited
		ps, running, exited bool
	}{
		{"running, no cmd", Sandbox{Status: StatusRunning}, StatusRunning, true, true, false},
		{"running cmd", Sandbox{Status: StatusRunning, Options: withCmd}, StatusRunning, true, true, false},
		{"cmd ended", Sandbox{Status: StatusRunning, Options: withCmd, CmdExit: &Exit{ExitCode: 5}}, StatusExited, false, false, true},
		{"cmd restarting", Sandbox{Status: StatusRunning, Options: withCmd, CmdRestarting: &Exit{ExitCode: 1}}, StatusRestarting, true, false, false},
		{"stopped", Sandbox{Status: StatusStopped, ExitCode: &five, Stopped: &stopped}, StatusExited, false, false, true},
		{"paused", Sandbox{Status: StatusPaused, Options: withCmd}, StatusPaused, true, false, false},
		{"creating", Sandbox{Status: StatusCreating}, StatusCreating, true, false, false},
	}
	for _, c := range cases {
		if got := c.sb.State(); got != c.state {
			t.Errorf("%s: state %q, want %q", c.name, got, c.state)
		}
		for _, f := range []struct {
			f    Filter
			want bool
		}{{Filter{Running: true}, c.ps}, {Filter{Status: StatusRunning}, c.running}, {Filter{Status: StatusExited}, c.exited}} {
			if got := f.f.Match(&c.sb); got != f.want {
				t.Errorf("%s: filter %+v selects it: %v, want %v", c.name, f.f, got, f.want)
			}
		}
		data, err := json.Marshal(c.sb)
		if err != nil || !strings.Contains(string(data), `"state":"`+string(c.state)+`"`) {
			t.Errorf("%s: JSON %s (%v) lacks its state", c.name, data, err)
		}
		var back Sandbox
		if err := json.Unmarshal(data, &back); err != nil || back.Status != c.sb.Status {
			t.Errorf("%s: JSON does not read back: %v", c.name, err)
		}
	}
	if e := cases[4].sb.LastExit(); e == nil || e.ExitCode != 5 || !e.FinishedAt.Equal(stopped) {
		t.Errorf("last exit of a stopped sandbox: %+v", e)
	}
	if (&Filter{Status: StatusStopped}).Match(&cases[2].sb) {
		t.Error("status=stopped selects a running sandbox whose command ended")
	}
}

func TestParseRestartPolicy(t *testing.T) {
	for in, want := range map[string]RestartPolicy{
		"no": {Name: RestartNo}, "always": {Name: RestartAlways}, "unless-stopped": {Name: RestartUnlessStopped},
		"on-failure": {Name: RestartOnFailure}, "on-failure:3": {Name: RestartOnFailure, MaxRetries: 3},
	} {
		got, err := ParseRestartPolicy(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("%q: %+v %v (%q)", in, got, err, got.String())
		}
	}
	for _, in := range []string{"sometimes", "always:3", "on-failure:-1", "on-failure:x", ""} {
		if _, err := ParseRestartPolicy(in); in != "" && !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", in, err)
		}
	}
	o := Options{Image: "x", Restart: RestartPolicy{Name: RestartAlways}}
	if err := o.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "needs a main command") {
		t.Errorf("restart without cmd: %v", err)
	}
	o.Cmd = []string{"true"}
	if err := o.Validate(); err != nil {
		t.Errorf("restart with cmd: %v", err)
	}
	o.Restart.MaxRetries = 2
	if err := o.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("always with a count: %v", err)
	}
}
