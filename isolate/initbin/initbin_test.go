package initbin

import (
	"os"
	"os/exec"
	"testing"
)

func TestExtract(t *testing.T) {
	if _, err := os.Stat("bin/sbx-init"); err != nil {
		t.Fatal("no sbx-init to embed: build it first with `make build`")
	}
	dir := t.TempDir()
	p1, ok, err := Extract(dir)
	if err != nil || !ok {
		t.Fatalf("Extract: %v %v", ok, err)
	}
	p2, _, err := Extract(dir)
	if err != nil || p2 != p1 {
		t.Fatalf("second Extract: %q %v, want %q", p2, err, p1)
	}
	fi, err := os.Stat(p1)
	if err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("extracted file: %v %v", fi, err)
	}
	// The binary runs: as an init outside a sandbox it still runs a command.
	out, err := exec.Command(p1, "reaper", "--", "echo", "hi").CombinedOutput()
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("sbx-init reaper: %q %v", out, err)
	}
	if err := exec.Command(p1, "bogus").Run(); err == nil {
		t.Error("sbx-init accepted an unknown subcommand")
	}
}
