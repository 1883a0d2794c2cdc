package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/internal/helperbin"
)

// Workload is what every subject of a scenario runs: the same command in
// the same unpacked root filesystem.
type Workload struct {
	// Rootfs is the unpacked root directory; every subject uses it
	// read-only (sbx uses Image instead when it is set).
	Rootfs string
	// Image, when set, is the image sbx runs (`sbx run IMAGE` and the
	// layers Lowers in-process); its store belongs to the sbx --root
	// StateRoot. See UseImage.
	Image      string
	Lowers     []string
	StateRoot  string
	imageStore *imagecache.Store
	// Args is the command; ["true"] when empty.
	Args []string
	// SbxBin is a statically linked sbx binary: the CLI of the cold
	// scenario and the helper (sandbox init) of in-process scenarios.
	SbxBin string
	// RunRoot is sbx's runtime state directory; "" uses sbx's default.
	RunRoot string
}

// Validate checks that the workload can run.
func (w *Workload) Validate() error {
	if len(w.Args) == 0 {
		w.Args = []string{"true"}
	}
	fi, err := os.Stat(w.Rootfs)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("root filesystem %q is not a directory", w.Rootfs)
	}
	if err := CheckStatic(w.SbxBin); err != nil {
		return err
	}
	if w.RunRoot == "" {
		w.RunRoot = "/run/sbx"
	}
	return nil
}

// CheckStatic returns an error unless path is a statically linked
// executable (it runs inside foreign root filesystems).
func CheckStatic(path string) error {
	if err := helperbin.CheckStatic(path); err != nil {
		return fmt.Errorf("sbx binary: %w", err)
	}
	return nil
}

// runCmd runs a command with a deadline and returns its combined output;
// the error carries the output's last lines.
func runCmd(ctx context.Context, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, lastLines(out.String(), 3))
	}
	return out.String(), nil
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "(no output)"
	}
	return strings.Join(lines, " | ")
}

// firstLine returns the first line of s, trimmed.
func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l)
}

// lookPath finds a runtime's binary or returns an error wrapping
// ErrNotFound that says how to install it.
func lookPath(bin, pkg string) (string, error) {
	p, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%s: %w (apt-get install %s, or make deps-bench)", bin, ErrNotFound, pkg)
	}
	return p, nil
}
