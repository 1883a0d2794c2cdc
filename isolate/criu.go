package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultCRIUPath is where `make deps` (scripts/criu.sh) puts its CRIU
// launcher on hosts whose own criu is missing or older than 4: Debian
// trixie's criu in a directory of its own, run through trixie's loader.
const DefaultCRIUPath = "/usr/local/lib/sbx-criu/bin/criu"

// MinCRIUVersion is the oldest CRIU sbx runs: 3.x (Debian bookworm's 3.17)
// fails on current kernels ("Unexpected rt vDSO area bounds"), and 4.1
// cannot dump a TCP socket on Linux 6.16 and later (SO_PASSCRED).
const MinCRIUVersion = 40200

// CRIU is the checkpoint tool sbx found, or why none can be used.
type CRIU struct {
	Path    string // the binary (or launcher) run as `criu`
	Version int    // major*10000 + minor*100 + sublevel, e.g. 40101
	Err     error  // why checkpoints cannot work; nil when they can
}

// VersionString is the version as CRIU prints it, e.g. "4.1.1".
func (c CRIU) VersionString() string {
	if c.Version == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", c.Version/10000, c.Version/100%100, c.Version%100)
}

// ErrNoCRIU is the error of checkpoint and restore on a host without a
// usable CRIU.
var ErrNoCRIU = errors.New("no usable CRIU 4.2 or later (run `make deps`, or install one and put it on PATH or set SBX_CRIU)")

// FindCRIU looks for CRIU: the configured path if one is given, else the
// `criu` on PATH when it is MinCRIUVersion or later, else DefaultCRIUPath. It runs
// `criu --version` (no `criu check`, which takes longer: Check does).
func FindCRIU(configured string) CRIU {
	if configured != "" {
		return probeCRIU(configured)
	}
	var first CRIU
	if p, err := exec.LookPath("criu"); err == nil {
		first = probeCRIU(p)
		if first.Err == nil {
			return first
		}
	}
	if _, err := os.Stat(DefaultCRIUPath); err == nil {
		if c := probeCRIU(DefaultCRIUPath); c.Err == nil || first.Path == "" {
			return c
		}
	}
	if first.Path != "" {
		return first
	}
	return CRIU{Err: ErrNoCRIU}
}

var versionLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^Version:\s*(\d+)\.(\d+)(?:\.(\d+))?`)
})

// probeCRIU runs path --version.
func probeCRIU(path string) CRIU {
	c := CRIU{Path: path}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		c.Err = fmt.Errorf("%w: %s --version: %w", ErrNoCRIU, path, err)
		return c
	}
	m := versionLine().FindSubmatch(out)
	if m == nil {
		c.Err = fmt.Errorf("%w: %s --version printed no version: %.100q", ErrNoCRIU, path, out)
		return c
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	sub, _ := strconv.Atoi(string(m[3]))
	c.Version = major*10000 + minor*100 + sub
	if c.Version < MinCRIUVersion {
		c.Err = fmt.Errorf("%w: %s is CRIU %s, too old for current kernels", ErrNoCRIU, path, c.VersionString())
	}
	return c
}

// Check runs `criu check` and returns the reason it fails, if it does.
func (c CRIU) Check(ctx context.Context) error {
	if c.Err != nil {
		return c.Err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Path, "check").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s check: %w: %s", c.Path, err, strings.TrimSpace(string(tail(out, 500))))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// criuPath is the directory put first on PATH so that libcontainer and
// go-criu, which both run "criu" from PATH, run the CRIU chosen by UseCRIU.
var criuPath struct {
	sync.Mutex
	dir, target string
}

// UseCRIU makes c the CRIU that checkpoints and restores of this process
// run: a link named criu to c.Path in dir (created if needed), with dir put
// first on the process's PATH.
func UseCRIU(c CRIU, dir string) error {
	if c.Err != nil {
		return c.Err
	}
	criuPath.Lock()
	defer criuPath.Unlock()
	if criuPath.dir == dir && criuPath.target == c.Path {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	link := filepath.Join(dir, "criu")
	// The binary itself: a process started by one that ran UseCRIU finds
	// this very link first on the PATH it inherited.
	abs, err := filepath.EvalSymlinks(c.Path)
	if err == nil {
		abs, err = filepath.Abs(abs)
	}
	if err != nil {
		return fmt.Errorf("CRIU at %s: %w", c.Path, err)
	}
	if cur, err := os.Readlink(link); err != nil || cur != abs {
		tmp := link + ".tmp" + strconv.Itoa(os.Getpid())
		_ = os.Remove(tmp)
		if err := os.Symlink(abs, tmp); err != nil {
			return fmt.Errorf("link CRIU into %s: %w", dir, err)
		}
		if err := os.Rename(tmp, link); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("link CRIU into %s: %w", dir, err)
		}
	}
	path := os.Getenv("PATH")
	if criuPath.dir != "" {
		path = strings.TrimPrefix(path, criuPath.dir+string(os.PathListSeparator))
	}
	if err := os.Setenv("PATH", dir+string(os.PathListSeparator)+path); err != nil {
		return err
	}
	criuPath.dir, criuPath.target = dir, c.Path
	return nil
}
