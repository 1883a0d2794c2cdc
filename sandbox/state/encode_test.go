package state

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

// TestWriteEncodesAsJSONMarshal: a record with a MarshalJSON method of
// its own (a sandbox's, which adds its state) is written byte for byte as
// json.Marshal encodes it, strings that json escapes included; a nil one
// as null.
func TestWriteEncodesAsJSONMarshal(t *testing.T) {
	s := newStore(t)
	now := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC)
	sb := &sbx.Sandbox{ID: "0123456789abcdef0123456789abcdef", Name: "a<b>&c", Status: sbx.StatusRunning, Created: now, Started: &now,
		Options: sbx.Options{Env: []string{"X=<script>\u2028"}, Cmd: []string{"sh"}}}
	for _, v := range []any{sb, (*sbx.Sandbox)(nil), *sb} {
		l, err := s.Create(sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Write(v); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(s.Dir(sb.ID), recordFile))
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("record of %T:\n%s\nwant json.Marshal's\n%s", v, got, want)
		}
		if err := l.Remove(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProcessStart reads this process's start time, which its stat line
// has as field 22 after a command name that may hold spaces and
// parentheses; a zombie has none.
func TestProcessStart(t *testing.T) {
	start, ok := ProcessStart(os.Getpid())
	if !ok || start == 0 {
		t.Fatalf("ProcessStart of this process: %d, %v", start, ok)
	}
	for _, c := range []struct {
		line  string
		start uint64
		ok    bool
	}{
		{"42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615", 98765, true},
		{"42 (x) Z 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000", 0, false},
		{"42 (x) S 1 42 42", 0, false},
		{"42 x S 1", 0, false},
	} {
		if start, ok := parseProcessStart([]byte(c.line)); start != c.start || ok != c.ok {
			t.Errorf("parseProcessStart(%q) = %d, %v; want %d, %v", c.line, start, ok, c.start, c.ok)
		}
	}
}
