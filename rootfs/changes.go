package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Kinds of a Change, as docker diff prints them.
const (
	Added   = "A"
	Changed = "C"
	Deleted = "D"
)

// ErrTooManyChanges is Changes' error when the layer holds more changes
// than it may list.
var ErrTooManyChanges = errors.New("too many changes to list")

// Change is one path of a sandbox's root that differs from its image:
// Kind is Added, Changed or Deleted; Path is absolute inside the sandbox.
type Change struct {
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// UpperDir is the writable layer of the root prepared in dir.
func UpperDir(dir string) string { return filepath.Join(dir, rwDir, "upper") }

// Changes lists what the writable layer upper changed over lowers (the
// image's layers, lowest first), sorted by path, as docker diff does: a
// path in upper is Changed when the lowers have it and Added otherwise,
// an overlayfs whiteout is Deleted. skip reports the paths (relative, like
// "etc/hosts") that sbx itself writes and that are left out, with the
// directories that were copied up only to hold them; nil skips nothing.
//
// upper is written by the sandbox and is hostile: nothing in it or in the
// lowers is followed, a lower path counts only when none of its parents is
// a symbolic link or a whiteout, and at most max changes are listed (more
// is an error).
func Changes(upper string, lowers []string, skip func(rel string) bool, max int) ([]Change, error) {
	var out []Change
	holdsSkipped := map[string]bool{} // "/etc" when "etc/hosts" was skipped
	err := filepath.WalkDir(upper, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(upper, full)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel) {
			for p := path.Dir("/" + rel); p != "/"; p = path.Dir(p) {
				holdsSkipped[p] = true
			}
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if len(out) >= max {
			return fmt.Errorf("%w: more than %d", ErrTooManyChanges, max)
		}
		kind := Added
		if d.Type()&fs.ModeCharDevice != 0 && isWhiteout(full) {
			kind = Deleted
		} else if inLowers(lowers, rel) {
			kind = Changed
		}
		out = append(out, Change{Kind: kind, Path: "/" + rel})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the changes of the writable layer: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	// A directory copied up only to hold what sbx wrote is no change.
	holdsListed := map[string]bool{}
	for _, c := range out {
		for p := path.Dir(c.Path); p != "/"; p = path.Dir(p) {
			holdsListed[p] = true
		}
	}
	kept := out[:0]
	for _, c := range out {
		if c.Kind == Changed && holdsSkipped[c.Path] && !holdsListed[c.Path] {
			continue
		}
		kept = append(kept, c)
	}
	return kept, nil
}

// isWhiteout reports whether p is an overlayfs whiteout: a 0:0 character
// device.
func isWhiteout(p string) bool {
	var st syscall.Stat_t
	return syscall.Lstat(p, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == 0
}

// inLowers reports whether the merged lowers hold rel: the topmost layer
// that has rel (or a whiteout of it, or of a parent) decides.
func inLowers(lowers []string, rel string) bool {
	for i := len(lowers) - 1; i >= 0; i-- {
		switch lookup(lowers[i], rel) {
		case present:
			return true
		case hidden:
			return false
		}
	}
	return false
}

type presence int

const (
	absent  presence = iota // this layer says nothing; look below
	present                 // this layer has the path
	hidden                  // this layer deletes the path (or a parent)
)

// lookup walks rel in one layer component by component with lstat, never
// through a symbolic link.
func lookup(layer, rel string) presence {
	p := layer
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return absent
		}
		if fi.Mode()&fs.ModeCharDevice != 0 && isWhiteout(p) {
			return hidden
		}
		if i == len(parts)-1 {
			return present
		}
		if !fi.IsDir() {
			return absent
		}
	}
	return absent
}
