package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/client"
)

// maxBindFrom caps what one RUN --mount=type=bind,from= reads out of a
// stage or image.
const maxBindFrom = 4 << 30

// runMount is one RUN --mount as this build sets it up.
type runMount struct {
	m *instructions.Mount
	// target is the absolute in-sandbox path.
	target string
	// key is what the mount adds to the step's cache key: never a
	// secret's value nor a cache's contents.
	key string
	// src is the image a bind mount reads with from= (nil: the context).
	src *sbx.Image
	// entries are the context files of a bind mount without from=.
	entries []entry
	// secret is the value of a secret mount, nil when optional and not given.
	secret []byte
	// agent is the host socket of an ssh mount, "" when optional and not given.
	agent string
}

// runMounts checks and resolves the mounts of c in the stage s.
func (b *builder) runMounts(ctx context.Context, s *stageState, c *instructions.RunCommand) ([]*runMount, error) {
	var out []*runMount
	agents := 0 // ssh mounts so far: the default target's number
	for _, m := range instructions.GetMounts(c) {
		rm := &runMount{m: m}
		target := m.Target
		if m.Type == instructions.MountTypeSecret && target == "" && m.Env == nil {
			id := m.CacheID
			if id == "" {
				return nil, fmt.Errorf("--mount=type=secret needs an id or a target")
			}
			target = "/run/secrets/" + id
		}
		if target != "" && !path.IsAbs(target) {
			target = path.Join(orRoot(s.cfg.WorkingDir), target)
		}
		if target != "" {
			target = path.Clean(target)
		}
		if target == "/" {
			return nil, fmt.Errorf("--mount target %q: mount over / is not allowed", m.Target)
		}
		rm.target = target
		switch m.Type {
		case instructions.MountTypeCache:
			if target == "" {
				return nil, fmt.Errorf("--mount=type=cache needs a target")
			}
			if m.From != "" {
				return nil, fmt.Errorf("--mount=type=cache,from= is not supported by sbx build")
			}
			id := m.CacheID
			if id == "" {
				id = target
			}
			rm.key = fmt.Sprintf("cache id=%q target=%q ro=%v", id, target, m.ReadOnly)
		case instructions.MountTypeTmpfs:
			if target == "" {
				return nil, fmt.Errorf("--mount=type=tmpfs needs a target")
			}
			rm.key = fmt.Sprintf("tmpfs target=%q size=%d", target, m.SizeLimit)
		case instructions.MountTypeSecret:
			id := m.CacheID
			if id == "" {
				id = path.Base(m.Target)
			}
			m.CacheID = id
			v, ok := b.o.Secrets[id]
			if !ok && m.Required {
				return nil, fmt.Errorf("secret %q is required: give it with sbx build --secret id=%s,src=FILE (or env=VAR)", id, id)
			}
			if ok {
				rm.secret = []byte(v)
			}
			env := ""
			if m.Env != nil {
				env = *m.Env
			}
			rm.key = fmt.Sprintf("secret id=%q target=%q env=%q", id, target, env)
		case instructions.MountTypeSSH:
			id := m.CacheID
			if id == "" {
				id = "default"
			}
			if target == "" {
				target = fmt.Sprintf("/run/buildkit/ssh_agent.%d", agents)
				rm.target = target
			}
			agents++
			rm.agent = b.o.SSH[id]
			if rm.agent == "" && m.Required {
				return nil, fmt.Errorf("ssh agent %q is required: give it with sbx build --ssh %s=SOCKET (e.g. $SSH_AUTH_SOCK)", id, id)
			}
			rm.key = fmt.Sprintf("ssh id=%q target=%q", id, target)
		case instructions.MountTypeBind:
			if target == "" {
				return nil, fmt.Errorf("--mount=type=bind needs a target")
			}
			src := m.Source
			if src == "" {
				src = "/"
			}
			if m.From != "" {
				img, err := b.fromImage(ctx, m.From)
				if err != nil {
					return nil, err
				}
				rm.src = img
				rm.key = fmt.Sprintf("bind from=%s source=%q target=%q ro=%v", img.Digest, src, target, m.ReadOnly)
				break
			}
			rel, err := relPath(src)
			if err != nil {
				return nil, err
			}
			entries, _, err := b.ctx.sources([]string{rel})
			if err != nil {
				return nil, err
			}
			if fi, err := b.ctx.root.Stat(rel); err == nil && !fi.IsDir() {
				return nil, fmt.Errorf("--mount=type=bind,source=%s: sbx build binds directories only", m.Source)
			}
			sum, err := b.ctx.hash(entries)
			if err != nil {
				return nil, err
			}
			rm.entries = entries
			rm.key = fmt.Sprintf("bind source=%q files=%s target=%q ro=%v", rel, sum, target, m.ReadOnly)
		default:
			return nil, fmt.Errorf("--mount=type=%s is not supported by sbx build", m.Type)
		}
		out = append(out, rm)
	}
	return out, nil
}

// fromImage is the image a from= names: a stage built before, or an image.
func (b *builder) fromImage(ctx context.Context, from string) (*sbx.Image, error) {
	if j, ok := b.f.stageIndex(from); ok {
		if b.results[j] == nil {
			return nil, fmt.Errorf("from=%s names a stage that comes later or was not built", from)
		}
		return b.results[j].img, nil
	}
	img, err := b.eng.Image(ctx, from, b.o.Pull)
	if err != nil {
		return nil, fmt.Errorf("from=%s: %w", from, err)
	}
	return img, nil
}

// setUp makes the host side of the mounts and adds them to o: the paths
// that go into the sandbox, a cleanup, and the secret environment.
func (b *builder) setUp(ctx context.Context, mounts []*runMount, o *sbx.Options) (drop []string, env []string, cleanup func(), err error) {
	var dirs []string
	var releases []func()
	cleanup = func() {
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
		for _, r := range releases {
			r()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	tmp := func(secret bool) (string, error) {
		d, err := b.eng.TempDir(secret)
		if err == nil {
			dirs = append(dirs, d)
		}
		return d, err
	}
	for _, rm := range mounts {
		m := rm.m
		if rm.target != "" {
			drop = append(drop, rm.target)
		}
		switch m.Type {
		case instructions.MountTypeCache:
			id := m.CacheID
			if id == "" {
				id = rm.target
			}
			mode, uid, gid := fs.FileMode(0o755), 0, 0
			if m.Mode != nil {
				mode = fs.FileMode(*m.Mode)
			}
			if m.UID != nil {
				uid = int(*m.UID)
			}
			if m.GID != nil {
				gid = int(*m.GID)
			}
			dir, release, err := b.eng.CacheDir(id, mode, uid, gid)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("cache %q: %w", id, err)
			}
			releases = append(releases, release)
			o.Volumes = append(o.Volumes, sbx.Volume{HostPath: dir, Path: rm.target, ReadOnly: m.ReadOnly, IDMap: sbx.VolumeIDMapHost})
		case instructions.MountTypeTmpfs:
			o.Tmpfs = append(o.Tmpfs, sbx.Tmpfs{Path: rm.target, SizeBytes: m.SizeLimit})
		case instructions.MountTypeSecret:
			if rm.secret == nil {
				drop = slices.DeleteFunc(drop, func(p string) bool { return p == rm.target })
				continue
			}
			if m.Env != nil {
				name := *m.Env
				if name == "" {
					name = strings.ToUpper(m.CacheID)
				}
				env = append(env, name+"="+string(rm.secret))
			}
			if rm.target == "" {
				continue
			}
			dir, err := tmp(true)
			if err != nil {
				return nil, nil, nil, err
			}
			mode := fs.FileMode(0o400)
			if m.Mode != nil {
				mode = fs.FileMode(*m.Mode)
			}
			f := filepath.Join(dir, "secret")
			if err := os.WriteFile(f, rm.secret, mode); err != nil {
				return nil, nil, nil, fmt.Errorf("secret %q: %w", m.CacheID, err)
			}
			if m.UID != nil || m.GID != nil {
				uid, gid := 0, 0
				if m.UID != nil {
					uid = int(*m.UID)
				}
				if m.GID != nil {
					gid = int(*m.GID)
				}
				if err := os.Chown(f, uid, gid); err != nil {
					return nil, nil, nil, fmt.Errorf("secret %q: %w", m.CacheID, err)
				}
			}
			o.Volumes = append(o.Volumes, sbx.Volume{HostPath: f, Path: rm.target, ReadOnly: true, IDMap: sbx.VolumeIDMapHost})
		case instructions.MountTypeSSH:
			if rm.agent == "" {
				drop = slices.DeleteFunc(drop, func(p string) bool { return p == rm.target })
				continue
			}
			// The first agent is the step's SSH_AUTH_SOCK, as BuildKit sets it.
			if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SSH_AUTH_SOCK=") }) {
				env = append(env, "SSH_AUTH_SOCK="+rm.target)
			}
			o.Volumes = append(o.Volumes, sbx.Volume{HostPath: rm.agent, Path: rm.target, IDMap: sbx.VolumeIDMapHost})
		case instructions.MountTypeBind:
			dir, err := tmp(false)
			if err != nil {
				return nil, nil, nil, err
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				return nil, nil, nil, err
			}
			pr, pw := io.Pipe()
			if rm.src != nil {
				go func() { pw.CloseWithError(b.readFrom(ctx, rm.src, m.Source, pw)) }()
			} else {
				go func() { pw.CloseWithError(b.ctx.writeTar(pw, rm.entries, nil)) }()
			}
			err = untar(pr, root)
			pr.CloseWithError(io.ErrClosedPipe)
			root.Close()
			if err != nil {
				return nil, nil, nil, fmt.Errorf("--mount=type=bind,source=%s: %w", m.Source, err)
			}
			o.Volumes = append(o.Volumes, sbx.Volume{HostPath: dir, Path: rm.target, ReadOnly: m.ReadOnly, IDMap: sbx.VolumeIDMapHost})
		}
	}
	return drop, env, cleanup, nil
}

// readFrom writes the contents of the directory src of img as a tar
// stream, names relative to src.
func (b *builder) readFrom(ctx context.Context, img *sbx.Image, src string, w io.Writer) error {
	ssb, err := b.eng.Create(ctx, sbx.Options{Image: img.Digest, Network: sbx.NetworkNone, UserNS: sbx.UserNSHost, User: "0:0", Workdir: "/", Labels: map[string]string{"sbx.build": "source"}})
	if err != nil {
		return fmt.Errorf("sandbox of the source: %w", err)
	}
	defer b.eng.Remove(context.WithoutCancel(ctx), ssb.ID, sbx.RemoveOptions{Force: true})
	scl, _, err := client.DialSandbox(ctx, b.eng, ssb.ID)
	if err != nil {
		return err
	}
	defer scl.Close()
	sp := path.Clean("/" + src)
	pr, pw := io.Pipe()
	go func() {
		_, err := scl.GetArchive(ctx, sp, pw, maxBindFrom)
		pw.CloseWithError(err)
	}()
	err = retar(pr, w, path.Base(sp), sp != "/", "", nil)
	pr.CloseWithError(io.ErrClosedPipe)
	return err
}

// untar extracts a tar stream into root: files, directories, symlinks
// and hard links, every path resolved inside root; other entries are
// skipped. The stream may come from a sandbox and is not trusted.
func untar(r io.Reader, root *os.Root) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "/"))
		if name == "." || name == ".." || strings.HasPrefix(name, "../") {
			continue
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode); err != nil {
				return err
			}
			_ = root.Chmod(name, mode)
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			_ = root.Chmod(name, mode)
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case tar.TypeLink:
			if err := root.Link(path.Clean(strings.TrimPrefix(hdr.Linkname, "/")), name); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
	}
}

// CacheDirName is the directory name of a RUN --mount=type=cache id: its
// hash, so that any id is a safe name.
func CacheDirName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}
