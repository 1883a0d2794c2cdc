package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

// A working directory the image's symlinks make longer than PATH_MAX is
// refused as invalid, saying why; a file on its path is refused naming
// the file; a directory the image lacks is fine.
func TestCheckWorkdirRefusesWhatCannotBeMade(t *testing.T) {
	layer := t.TempDir()
	deep := strings.Repeat("a/", 1000)
	for i := 0; i < 40; i++ {
		if err := os.Symlink(fmt.Sprintf("s%d/%s", i+1, deep), filepath.Join(layer, fmt.Sprintf("s%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(layer, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for wd, want := range map[string]string{
		"/s0/x":      "longer than 4095 bytes",
		"/file/x":    "(/file is a file there)",
		"/s39/x":     "",
		"/work/here": "",
	} {
		err := checkWorkdir(&sbx.Options{Workdir: wd}, []string{layer})
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", wd, err)
		case want != "" && (!errors.Is(err, sbx.ErrInvalid) || !strings.Contains(fmt.Sprint(err), want)):
			t.Errorf("%s: %v; want ErrInvalid saying %q", wd, err, want)
		}
	}
}
