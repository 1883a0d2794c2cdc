// Package contexttar moves a build context as a tar stream: a client
// writes it (minus what .dockerignore leaves out, as docker build sends
// it), and a server extracts it into a directory of its own, refusing
// anything that would land outside.
package contexttar

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// MaxEntries caps the entries of a context an extraction accepts.
const MaxEntries = 1 << 20

// Write writes the directory dir as a tar stream to w, leaving out what
// its ignore file (dockerfile+".dockerignore" if there is one, else
// dir/.dockerignore) excludes; the Dockerfile and ignore files inside dir
// are always sent. Symlinks are sent as links.
func Write(w io.Writer, dir, dockerfile string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("send the build context: %w", err)
	}
	pm, err := IgnoreMatcher(root, dockerfile)
	root.Close()
	if err != nil {
		return err
	}
	keep := map[string]bool{".dockerignore": true}
	if rel, err := filepath.Rel(dir, dockerfile); err == nil && filepath.IsLocal(rel) {
		keep[filepath.ToSlash(rel)] = true
		keep[filepath.ToSlash(rel)+".dockerignore"] = true
	}
	tw := tar.NewWriter(w)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if pm != nil && !keep[rel] {
			if m, _ := pm.MatchesOrParentMatches(rel); m {
				if d.IsDir() && !pm.Exclusions() {
					return fs.SkipDir
				}
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !fi.Mode().IsRegular() && !fi.IsDir():
			return nil // sockets, FIFOs and devices are not part of a context
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = rel, 0, 0, "", ""
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, io.LimitReader(f, hdr.Size))
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("send the build context: %w", err)
	}
	return tw.Close()
}

// IgnoreMatcher reads the ignore file of the context root: the
// Dockerfile's own (dockerfile+".dockerignore") if there is one, else
// .dockerignore at the root; nil when there is none. Files inside the
// context are read through root, so a link cannot lead the read out.
func IgnoreMatcher(root *os.Root, dockerfile string) (*patternmatcher.PatternMatcher, error) {
	var data []byte
	err := fs.ErrNotExist
	if dockerfile != "" {
		if rel, rerr := filepath.Rel(root.Name(), dockerfile); rerr == nil && filepath.IsLocal(rel) {
			data, err = root.ReadFile(rel + ".dockerignore")
		} else {
			data, err = os.ReadFile(dockerfile + ".dockerignore")
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		data, err = root.ReadFile(".dockerignore")
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the ignore file: %w", err)
	}
	patterns, err := ignorefile.ReadAll(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	return pm, nil
}

// Extract writes the tar stream r into the existing, empty directory dir.
// Every entry is created inside dir (os.Root): names with .. or a leading
// /, links leading out, devices, FIFOs and more than MaxEntries entries
// are refused with an error, and what was extracted is left for the caller
// to remove with dir.
func Extract(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the build context: %w", err)
		}
		if n >= MaxEntries {
			return fmt.Errorf("the build context has more than %d entries", MaxEntries)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
		if name == "." {
			continue
		}
		if !filepath.IsLocal(name) {
			return fmt.Errorf("build context entry %q is outside the context", hdr.Name)
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("build context entry %q: %w", hdr.Name, err)
			}
		}
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("build context entry %q: %w", hdr.Name, err)
			}
			err = root.Chmod(name, mode|0o700)
		case tar.TypeReg:
			var f *os.File
			if f, err = root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err == nil {
				err = root.Chmod(name, mode)
			}
		case tar.TypeSymlink:
			err = root.Symlink(hdr.Linkname, name)
		case tar.TypeLink:
			target := path.Clean(hdr.Linkname)
			if !filepath.IsLocal(target) {
				return fmt.Errorf("build context entry %q links outside the context", hdr.Name)
			}
			err = root.Link(target, name)
		default:
			return fmt.Errorf("build context entry %q has type %q: only files, directories and links are sent", hdr.Name, string(hdr.Typeflag))
		}
		if err != nil {
			return fmt.Errorf("build context entry %q: %w", hdr.Name, err)
		}
	}
}
