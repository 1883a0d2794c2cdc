package swapfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Replace puts the new file in place, over an old one or where none was,
// and leaves no temporary file.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, content := range []string{"first", "second"} {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Replace(tmp, path); err != nil {
			t.Fatalf("replace with %q: %v", content, err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Fatalf("after replacing with %q: %q, %v", content, got, err)
		}
		if _, err := os.Stat(tmp); !os.IsNotExist(err) {
			t.Fatalf("the temporary file is left: %v", err)
		}
	}
	if err := Replace(filepath.Join(dir, "missing"), path); err == nil {
		t.Fatal("replaced with a file that does not exist")
	}
}
