package build

import (
	"io/fs"
	"strings"
	"testing"
)

func TestChmod(t *testing.T) {
	cases := []struct {
		spec string
		in   fs.FileMode
		dir  bool
		want fs.FileMode
	}{
		{"0755", 0o600, false, 0o755},
		{"4755", 0o600, false, 0o755 | fs.ModeSetuid},
		{"u+x", 0o644, false, 0o744},
		{"u+x,g-r", 0o644, false, 0o704},
		{"go=", 0o755, true, 0o700},
		{"a+X", 0o644, false, 0o644},
		{"a+X", 0o744, false, 0o755},
		{"a+X", 0o644, true, 0o755},
		{"+w", 0o444, false, 0o666},
		{"o=rx,u-w", 0o640, false, 0o445},
		{"g+s", 0o755, true, 0o755 | fs.ModeSetgid},
	}
	for _, c := range cases {
		m, err := parseChmod(c.spec)
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		if got := m.apply(c.in, c.dir); got != c.want {
			t.Errorf("%s on %o: got %o, want %o", c.spec, c.in, got, c.want)
		}
	}
	for _, bad := range []string{"99999", "u+q", "z+x", "u", "0o755x"} {
		if _, err := parseChmod(bad); err == nil {
			t.Errorf("--chmod=%s was accepted", bad)
		}
	}
	if m, err := parseChmod(""); err != nil || m != nil || m.apply(0o640, false) != 0o640 {
		t.Errorf("no --chmod changes the mode: %v %v", m, err)
	}
}

func TestChownUser(t *testing.T) {
	for in, want := range map[string]string{"": "0:0", "1000": "1000:1000", "1000:": "1000:1000", "app": "app", "app:staff": "app:staff", ":staff": "0:staff", "1:2": "1:2"} {
		if got := chownUser(in); got != want {
			t.Errorf("--chown=%s: got %q, want %q", in, got, want)
		}
	}
}

func TestParseTrigger(t *testing.T) {
	if c, err := parseTrigger("RUN echo hi"); err != nil || !strings.EqualFold(c.Name(), "run") {
		t.Fatalf("RUN trigger: %v %v", c, err)
	}
	for _, bad := range []string{"ONBUILD RUN true", "FROM x", "", "RUN a\nRUN b"} {
		if _, err := parseTrigger(bad); err == nil {
			t.Errorf("trigger %q was accepted", bad)
		}
	}
}
