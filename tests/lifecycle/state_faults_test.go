package lifecycle

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestCorruptRecordKeepsTheSandbox: a damaged record (truncated, garbage)
// is reported as unreadable, gc leaves the sandbox running, rm without -f
// refuses and says what to do, and rm -f removes it and everything it made.
func TestCorruptRecordKeepsTheSandbox(t *testing.T) {
	for name, damage := range map[string]func(data []byte) []byte{
		"truncated": func(data []byte) []byte { return data[:len(data)/2] },
		"garbage":   func([]byte) []byte { return []byte("\x00\x01 not json") },
		"empty":     func([]byte) []byte { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			h := harness.NewHost(t)
			id := h.Create(t, "--name", "victim-"+name, "--network", "bridge")
			pid := h.Inspect(t, id).Pid
			rec := filepath.Join(h.Root, "sandboxes", id, "record.json")
			data, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(rec, damage(data), 0o600); err != nil {
				t.Fatal(err)
			}
			var list []map[string]any
			if err := json.Unmarshal([]byte(h.Must(t, "ps", "-a", "--format", "json")), &list); err != nil || len(list) != 1 {
				t.Fatalf("ps: %v %v", list, err)
			}
			if list[0]["status"] != "unreadable" || !strings.Contains(list[0]["problem"].(string), "rm -f") {
				t.Errorf("ps shows %v, want status unreadable and what to do", list[0])
			}
			if r := h.Sbx(t, "", "gc"); r.Code != 0 || strings.Contains(r.Stdout, id) {
				t.Errorf("gc: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				t.Fatalf("gc killed the sandbox whose record is unreadable: %v", err)
			}
			if r := h.Sbx(t, "", "rm", id); r.Code == 0 || !strings.Contains(r.Stderr, "unreadable") || !strings.Contains(r.Stderr, "rm -f") {
				t.Errorf("rm without -f: exit %d, %q", r.Code, r.Stderr)
			}
			if r := h.Sbx(t, "", "exec", id, "--", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "unreadable") {
				t.Errorf("exec: exit %d, %q", r.Code, r.Stderr)
			}
			h.Must(t, "rm", "-f", "victim-"+name)
			if out := h.Must(t, "ps", "-aq"); strings.TrimSpace(out) != "" {
				t.Errorf("after rm -f: %q", out)
			}
			if left := harness.BridgeLeftovers(t, h.Root, h.Run, h.Netns); len(left) > 0 {
				t.Errorf("rm -f left %v", left)
			}
			h.AssertNoLeaksOf(t, id)
		})
	}
}

// TestStopOnFullDisk: on a full state file system sbx stop either records
// the stop (the record is rewritten in the blocks it holds) or fails and
// says so once, clearly; with space again, stop finishes the job.
func TestStopOnFullDisk(t *testing.T) {
	h := harness.NewHost(t)
	if err := os.MkdirAll(h.Root, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "sbx-test-full", h.Root).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs as the state root: %v %s", err, out)
	}
	fill := filepath.Join(h.Root, "fill")
	t.Cleanup(func() {
		os.Remove(fill)
		if ids := strings.Fields(h.Sbx(t, "", "ps", "-aq").Stdout); len(ids) > 0 {
			h.Sbx(t, "", append([]string{"rm", "-f"}, ids...)...)
		}
		if out, err := exec.Command("umount", h.Root).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", h.Root, err, out)
		}
	})
	id := h.Create(t)
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	r := h.Sbx(t, "", "stop", id)
	if r.Code == 0 {
		// The record was rewritten in the blocks it holds: the stop is
		// recorded, so the sandbox must really be stopped.
		if st := h.Inspect(t, id).Status; st != "stopped" {
			t.Fatalf("sbx stop on a full disk exited 0 but the record says %s", st)
		}
	} else if !strings.Contains(r.Stderr, "no space left on device") || strings.Count(r.Stderr, "record.json") != 1 || !strings.Contains(r.Stderr, "free space") {
		t.Errorf("stop on a full disk says %q; want the reason, the file once and what to do", r.Stderr)
	}
	os.Remove(fill)
	h.Must(t, "stop", id)
	if st := h.Inspect(t, id).Status; st != "stopped" {
		t.Errorf("after the second stop: %s", st)
	}
	h.Must(t, "rm", id)
}
