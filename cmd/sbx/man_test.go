package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManPages: sbx man writes a page per visible command, from the
// commands' own help, and none for the hidden ones.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	if code, _, stderr := runSbx(t, "man", dir); code != 0 {
		t.Fatalf("sbx man: %d %s", code, stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "sbx-logs.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".TH \"SBX\" \"1\"", "sbx\\-logs \\- Print", "\\-\\-follow", "main command", ".SH SEE ALSO"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("sbx-logs.1 lacks %q:\n%s", want, page)
		}
	}
	for _, name := range []string{"sbx.1", "sbx-run.1", "sbx-image-ls.1", "sbx-save.1"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("no %s: %v", name, err)
		}
	}
	for _, hidden := range []string{"sbx-executor.1", "sbx-expiry-watcher.1"} {
		if _, err := os.Stat(filepath.Join(dir, hidden)); err == nil {
			t.Errorf("a page for the hidden command: %s", hidden)
		}
	}
}
