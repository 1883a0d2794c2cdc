// Package helperbin carries the small binaries that start sandboxes,
// sbx-init (cmd/sbx-init/c, in C: PID 1 of one-shot runs), sbx-executor
// (cmd/sbx-executor, PID 1 of long-lived sandboxes), sbx-lcinit
// (cmd/sbx-lcinit, libcontainer's init stage; see package isolate) and
// sbx-hold (cmd/sbx-hold, in C: on the host, it keeps a sandbox's
// published ports bound; see package netns), inside
// every program that links sbx, and writes each out once under a state
// directory, where sandboxes bind-mount it read-only. They are static and
// small (sbx-executor cgo-free), so they run in any image and start in
// about a millisecond or less; a program that embeds sbx needs no sbx
// binary on the machine.
//
// The binaries are build products, not sources: `go generate
// ./internal/helperbin` (run by `make build`) builds them into bin/ before
// the program that embeds them is compiled.
package helperbin

//go:generate sh -c "cc -static -O2 -Wall -Wextra -s -o bin/sbx-init ../../cmd/sbx-init/c/sbx-init.c && cc -static -O2 -Wall -Wextra -s -o bin/sbx-hold ../../cmd/sbx-hold/sbx-hold.c && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/sbx-executor ../../cmd/sbx-executor && CGO_ENABLED=1 go build -trimpath -tags 'seccomp netgo osusergo' -ldflags='-s -w -extldflags -static' -o bin/sbx-lcinit ../../cmd/sbx-lcinit"

import (
	"debug/elf"
	"embed"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// The helper binaries, by file name.
const (
	Init     = "sbx-init"     // one-shot init: "sbx-init reaper [flags] -- CMD"
	Executor = "sbx-executor" // executor: "sbx-executor executor [flags]"
	LCInit   = "sbx-lcinit"   // libcontainer's init stage (cgo); see isolate
	Hold     = "sbx-hold"     // holder of published host ports: "sbx-hold READY-FD STATE-DIR" (package netns)
)

//go:embed bin
var files embed.FS

// ErrNotEmbedded means this build of sbx carries no helper binaries: the
// program was compiled without running `go generate` in this package first.
// Install's error wrapping it says what to run for the sbx module the
// program was built with (see Hint).
var ErrNotEmbedded = errors.New("this build of sbx has no embedded helper binaries")

// module is the path of the sbx module.
const module = "github.com/sbxrun/sbx"

// Hint says how to build the helpers into a program whose build of the
// sbx module lacks them, given where that module came from: the main
// module (a checkout), a replace to a directory (a checkout), or a version
// from the module proxy (read-only; only release tags carry helpers).
func Hint(bi *debug.BuildInfo) string {
	const generic = "run `make helpers` (go generate ./internal/helperbin) in the sbx module's directory, then rebuild the program"
	if bi == nil {
		return generic
	}
	if bi.Main.Path == module {
		return "run `make helpers` (go generate ./internal/helperbin) in this checkout of sbx, then rebuild"
	}
	for _, d := range bi.Deps {
		if d.Path != module {
			continue
		}
		if r := d.Replace; r != nil && (filepath.IsAbs(r.Path) || strings.HasPrefix(r.Path, ".")) {
			return fmt.Sprintf("run `make helpers` in %s (the replace of %s), then rebuild this program", r.Path, module)
		}
		return fmt.Sprintf("%s %s from the module cache carries none (only release tags do; the cache is read-only): "+
			"require a release, or point a replace at a checkout where you ran `make helpers`, "+
			"or build cmd/sbx-init/c/sbx-init.c and cmd/sbx-executor static and name them in sandbox.HostConfig (docs/embedding.md)", module, d.Version)
	}
	return generic
}

// notEmbedded is ErrNotEmbedded with the Hint for this program.
func notEmbedded(name string) error {
	bi, _ := debug.ReadBuildInfo()
	return fmt.Errorf("%s: %w: %s", name, ErrNotEmbedded, Hint(bi))
}

// Embedded returns nil when this build carries every helper binary, and
// otherwise ErrNotEmbedded for the first one missing, with what to run: one
// line a test's TestMain can print before anything fails for want of it.
func Embedded() error {
	for _, name := range []string{Init, Executor, LCInit} {
		if fi, err := fs.Stat(files, "bin/"+name); err != nil || fi.Size() == 0 {
			return notEmbedded(name)
		}
	}
	return nil
}

// ExitUnlessEmbedded is for the TestMain of a package whose tests start
// sandboxes: without the helper binaries it prints one line, naming pkg
// and what to run, and exits 1, instead of every test failing for want of
// them.
func ExitUnlessEmbedded(pkg string) {
	if err := Embedded(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", pkg, err)
		os.Exit(1)
	}
}

// sampleBytes of each end of a binary name its installed copy: they hold
// the ELF headers with Go's build ID and the end of the file.
const sampleBytes = 64 << 10

// Install returns the path of the embedded helper name (Init or Executor)
// under dir, writing it there the first time: read-only, named by its size
// and a checksum, so that builds with different helpers never share a file
// and a running sandbox's binary is never replaced. It never copies the
// whole binary into memory: an allocation that size would start a garbage
// collection cycle on a sandbox's start path.
func Install(dir, name string) (string, error) {
	if name != Init && name != Executor && name != LCInit && name != Hold {
		return "", fmt.Errorf("helperbin: unknown helper %q", name)
	}
	f, err := files.Open("bin/" + name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", notEmbedded(name)
	}
	if err != nil {
		return "", fmt.Errorf("open embedded %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("stat embedded %s: %w", name, err)
	}
	if fi.Size() == 0 {
		return "", notEmbedded(name)
	}
	ra, canReadAt := f.(io.ReaderAt)
	if !canReadAt {
		return "", fmt.Errorf("embedded %s cannot be read at offsets", name)
	}
	size := fi.Size()
	buf := make([]byte, min(sampleBytes, size))
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, off := range []int64{0, size - int64(len(buf))} {
		if _, err := ra.ReadAt(buf, off); err != nil && err != io.EOF {
			return "", fmt.Errorf("read embedded %s: %w", name, err)
		}
		h.Write(buf)
	}
	path := filepath.Join(dir, name+"-"+strconv.FormatUint(uint64(h.Sum32()), 16)+"-"+strconv.FormatInt(size, 10))
	if st, err := os.Stat(path); err == nil && st.Size() == size {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, io.NewSectionReader(ra, 0, size)); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("install %s: %w", name, err)
	}
	return path, nil
}

// CheckStatic returns an error unless path is a statically linked
// executable: a binary that runs inside sandboxes finds no libraries there.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked and cannot run inside a sandbox; build it static (`make build`)", path)
		}
	}
	return nil
}
