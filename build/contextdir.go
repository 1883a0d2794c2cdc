package build

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/ulikunitz/xz"

	"github.com/sbxrun/sbx/build/contexttar"
)

// buildContext is the directory COPY and ADD read, seen through its
// .dockerignore. Every path is resolved inside it (os.Root): neither a
// source path nor a symlink in the context reaches outside.
type buildContext struct {
	dir  string
	root *os.Root
	pm   *patternmatcher.PatternMatcher // nil: nothing ignored
}

// openContext opens dir and reads its ignore file: <Dockerfile>.dockerignore
// beside the Dockerfile if there is one, else dir/.dockerignore.
func openContext(dir, dockerfile string) (*buildContext, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	pm, err := contexttar.IgnoreMatcher(root, dockerfile)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &buildContext{dir: dir, root: root, pm: pm}, nil
}

func (bc *buildContext) close() { bc.root.Close() }

// ignored reports whether .dockerignore leaves rel (a slash path) out.
func (bc *buildContext) ignored(rel string) bool {
	if bc.pm == nil || rel == "." {
		return false
	}
	m, err := bc.pm.MatchesOrParentMatches(rel)
	return err == nil && m
}

// entry is one file of a COPY: where it comes from and its name in the
// tar stream written into the build sandbox.
type entry struct {
	rel  string // in the context
	name string // in the stream, relative to the destination directory
	info fs.FileInfo
	link string // a symlink's target
}

// relPath turns a COPY source into a path inside the context, refusing
// one that climbs out of it.
func relPath(src string) (string, error) {
	c := path.Clean(filepath.ToSlash(src))
	c = strings.TrimPrefix(c, "/")
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%q is outside the build context", src)
	}
	if c == "" {
		c = "."
	}
	return c, nil
}

// sources expands the COPY sources (wildcards too) into the files they
// name, sorted. single reports one source naming one file, which a
// destination without a trailing slash then names.
func (bc *buildContext) sources(srcs []string) (out []entry, single bool, err error) {
	files := 0 // sources naming a file themselves
	for _, src := range srcs {
		rel, err := relPath(src)
		if err != nil {
			return nil, false, err
		}
		var matches []string
		if strings.ContainsAny(rel, "*?[") {
			match, err := sourceMatcher(rel)
			if err != nil {
				return nil, false, fmt.Errorf("%q: %w", src, err)
			}
			err = fs.WalkDir(bc.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if match(p) && !bc.ignored(p) {
					matches = append(matches, p)
					if d.IsDir() {
						return fs.SkipDir
					}
				}
				return nil
			})
			if err != nil {
				return nil, false, fmt.Errorf("%q: %w", src, err)
			}
			if len(matches) == 0 {
				return nil, false, fmt.Errorf("%q matches no file in the build context", src)
			}
		} else {
			if bc.ignored(rel) {
				return nil, false, fmt.Errorf("%q is excluded by .dockerignore", src)
			}
			matches = []string{rel}
		}
		for _, m := range matches {
			fi, err := bc.root.Stat(m)
			if err != nil {
				return nil, false, fmt.Errorf("%q: %w", src, contextErr(err))
			}
			if !fi.IsDir() {
				out = append(out, entry{rel: m, name: path.Base(m), info: fi})
				files++
				continue
			}
			got, err := bc.walk(m)
			if err != nil {
				return nil, false, fmt.Errorf("%q: %w", src, err)
			}
			out = append(out, got...)
		}
	}
	single = len(srcs) == 1 && files == 1 && len(out) == 1 && !strings.ContainsAny(srcs[0], "*?[")
	return out, single, nil
}

// sourceMatcher matches context paths against a COPY source with
// wildcards: path.Match's rules, and ** for any number of directories
// (none included), as docker's --parents examples use it.
func sourceMatcher(pattern string) (func(string) bool, error) {
	if !strings.Contains(pattern, "**") {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, err
		}
		return func(p string) bool { ok, _ := path.Match(pattern, p); return ok }, nil
	}
	pm, err := patternmatcher.New([]string{pattern})
	if err != nil {
		return nil, err
	}
	return func(p string) bool { ok, _ := pm.MatchesOrParentMatches(p); return ok }, nil
}

// copySources is sources with COPY's --parents and --exclude. With parents
// every entry keeps its path from the context's root under the
// destination, or from a "/./" in its source when there is one (rsync's
// --relative); an --exclude pattern (a .dockerignore pattern) drops the
// entries whose path under their source (a file's name, a directory's
// entries below it) matches, or lies below a match.
func (bc *buildContext) copySources(srcs []string, parents bool, excludes []string) ([]entry, bool, error) {
	if !parents && len(excludes) == 0 {
		return bc.sources(srcs)
	}
	var pm *patternmatcher.PatternMatcher
	if len(excludes) > 0 {
		var err error
		if pm, err = patternmatcher.New(excludes); err != nil {
			return nil, false, fmt.Errorf("--exclude: %w", err)
		}
	}
	var out []entry
	single := false
	for _, src := range srcs {
		keep := "." // with parents, the entries' names start below keep
		if parents {
			s := strings.TrimPrefix(filepath.ToSlash(src), "./")
			if i := strings.Index(s, "/./"); i >= 0 {
				k, err := relPath(s[:i])
				if err != nil {
					return nil, false, err
				}
				keep = k
			}
		}
		entries, one, err := bc.sources([]string{src})
		if err != nil {
			return nil, false, err
		}
		for _, e := range entries {
			if pm != nil {
				if m, _ := pm.MatchesOrParentMatches(e.name); m {
					continue
				}
			}
			if parents {
				if keep != "." {
					e.name = strings.TrimPrefix(e.rel, keep+"/")
				} else {
					e.name = e.rel
				}
			}
			out = append(out, e)
		}
		single = len(srcs) == 1 && one && !parents && len(out) == 1
	}
	return out, single, nil
}

// contextErr says plainly that a path leaving the context was refused.
func contextErr(err error) error {
	if strings.Contains(err.Error(), "path escapes from parent") {
		return errors.New("it leads outside the build context")
	}
	return err
}

// walk lists what is below the directory dir, names relative to it;
// symlinks stay links.
func (bc *buildContext) walk(dir string) ([]entry, error) {
	var out []entry
	err := fs.WalkDir(bc.root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if bc.ignored(p) {
			if d.IsDir() && !bc.pm.Exclusions() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := bc.root.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{rel: p, name: strings.TrimPrefix(p, dir+"/"), info: fi}
		if dir == "." {
			e.name = p
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if e.link, err = bc.root.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil // sockets, FIFOs and devices are not copied
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// hash is the cache input of the entries: names, modes, sizes, link
// targets and contents; not owners, not times.
func (bc *buildContext) hash(entries []entry) (string, error) {
	h := sha256.New()
	for _, e := range entries {
		fmt.Fprintf(h, "%q %o %d %q\n", e.name, uint32(e.info.Mode()), e.info.Size(), e.link)
		if e.info.Mode().IsRegular() {
			f, err := bc.root.Open(e.rel)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeTar writes the entries as a tar stream, with the mode chmod (when
// not nil) on files and directories.
func (bc *buildContext) writeTar(w io.Writer, entries []entry, mode *chmod) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr, err := tar.FileInfoHeader(e.info, e.link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = e.name, 0, 0, "", ""
		if e.info.IsDir() {
			hdr.Name += "/"
		}
		if mode != nil && hdr.Typeflag != tar.TypeSymlink {
			hdr.Mode = tarMode(mode.apply(fileMode(hdr.Mode), hdr.Typeflag == tar.TypeDir))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := bc.root.Open(e.rel)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, io.LimitReader(f, hdr.Size))
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// archiveReader returns the tar stream of a local archive ADD extracts
// (plain, gzip, bzip2 or xz, told by its content), or nil when the file is not
// one, which ADD then copies as it is.
func (bc *buildContext) archiveReader(rel string) (io.ReadCloser, error) {
	f, err := bc.root.Open(rel)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 512)
	head, _ := br.Peek(512)
	var r io.Reader
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		r = gz
	case bytes.HasPrefix(head, []byte("BZh")):
		r = bzip2.NewReader(br)
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		xr, err := xz.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		r = xr
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		r = br
	default:
		f.Close()
		return nil, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{r, f}, nil
}
