package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Binaries under test, found or built by TestMain.
var (
	// nomadBin is the pinned Nomad agent: $SBX_NOMAD_BIN (set by `make
	// test`) or what scripts/nomad-bin.sh builds and caches.
	nomadBin string
	// sbxBin is the static sbx binary that runs in every sandbox as its
	// executor: $SBX_BIN, or one built here.
	sbxBin string
	// pluginBin is the driver plugin, built here from this checkout.
	pluginBin string
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: the Nomad end-to-end tests need root (run `make test` as root)")
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "sbx-nomad-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := 1
	if err = findBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// findBinaries locates Nomad and sbx and builds the plugin into dir.
func findBinaries(dir string) error {
	var err error
	if nomadBin, err = findNomad(); err != nil {
		return err
	}
	sbxBin = os.Getenv("SBX_BIN")
	if sbxBin == "" {
		sbxBin = filepath.Join(dir, "sbx")
		if err := goBuild("../..", "./cmd/sbx", sbxBin, true); err != nil {
			return err
		}
	}
	pluginBin = filepath.Join(dir, "nomad-driver-sbx")
	return goBuild("..", "./cmd/nomad-driver-sbx", pluginBin, false)
}

// findNomad returns $SBX_NOMAD_BIN, or the binary scripts/nomad-bin.sh
// builds (once per machine, cached).
func findNomad() (string, error) {
	if p := os.Getenv("SBX_NOMAD_BIN"); p != "" {
		return p, nil
	}
	cmd := exec.Command("bash", "../../scripts/nomad-bin.sh")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build the pinned Nomad (scripts/nomad-bin.sh): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// goBuild builds pkg in the module at modDir into out, statically when
// static is set, with the build tags sbx needs.
func goBuild(modDir, pkg, out string, static bool) error {
	args := []string{"build", "-trimpath", "-tags", "seccomp netgo osusergo"}
	if static {
		args = append(args, "-ldflags", `-s -w -extldflags "-static"`)
	}
	cmd := exec.Command("go", append(args, "-o", out, pkg)...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
