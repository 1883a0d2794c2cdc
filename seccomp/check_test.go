package seccomp

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/opencontainers/runc/libcontainer/configs"
	lcseccomp "github.com/opencontainers/runc/libcontainer/seccomp"
)

// A build without the seccomp tag refuses a filter with a message that
// names the way out for a CLI user and for a library caller
// (Options.Seccomp); this test, built with the tag, runs itself again
// built without it.
func TestCheckWithoutSeccompNamesOptions(t *testing.T) {
	if !lcseccomp.Enabled {
		for name, err := range map[string]error{"Check": Check(&configs.Seccomp{}), "Compile": compileErr()} {
			if err == nil || !strings.Contains(err.Error(), "-tags seccomp") || !strings.Contains(err.Error(), `Options.Seccomp = "unconfined"`) {
				t.Errorf("%s without the seccomp tag: %v", name, err)
			}
		}
		return
	}
	if err := Check(&configs.Seccomp{}); err != nil {
		t.Fatalf("Check with the seccomp tag: %v", err)
	}
	cmd := exec.Command("go", "test", "-count=1", "-tags", "netgo osusergo", "-run", "^TestCheckWithoutSeccompNamesOptions$", ".")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("the test built without the seccomp tag: %v\n%s", err, out)
	}
}

func compileErr() error {
	_, err := Compile(&configs.Seccomp{})
	return err
}
