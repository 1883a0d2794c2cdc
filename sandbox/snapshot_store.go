package sandbox

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// The snapshot store: ROOT/snapshots/NAME/ holds one snapshot, made of
// regular files only, mode 0600 (a snapshot holds the sandbox's memory,
// and with it any secret the sandbox held):
//
//	snapshot.json   the sbx.Snapshot, with the sha256 of every other file
//	restore.json    what the restore needs besides (restoreInfo)
//	layer.tar       the writable layer (GNU tar, with xattrs and whiteouts)
//	criu/*          CRIU's images of the processes
//
// A snapshot is built in ROOT/snapshots/.partial-NAME-PID (its builder
// holds the flock of its lock file) and renamed into place when complete,
// so a crash leaves only a partial directory, which gc removes.

const (
	snapshotsDir   = "snapshots"
	snapshotFile   = "snapshot.json"
	restoreFile    = "restore.json"
	layerFile      = "layer.tar"
	criuImagesDir  = "criu"
	partialPrefix  = ".partial-"
	partialLock    = ".lock"
	maxSnapshotRec = 4 << 20 // cap on snapshot.json and restore.json
)

// restoreInfo is what a restore needs that the contract's Snapshot does
// not say.
type restoreInfo struct {
	// Placeholder is the abstract address the checkpointed executor waits
	// on for its listening socket (executor/api.PathCheckpointPrepare).
	Placeholder string `json:"placeholder"`
	// Executor is the executor binary the checkpointed one was run from
	// (its name has its digest): the restored sandbox mounts the same.
	Executor string `json:"executor"`
	// Stop marks a checkpoint made by stop --checkpoint, removed once the
	// sandbox resumed from it.
	Stop bool `json:"stop,omitempty"`
}

func (h *Host) snapshotsRoot() string { return filepath.Join(h.store.Root(), snapshotsDir) }

func (h *Host) snapshotDir(name string) string { return filepath.Join(h.snapshotsRoot(), name) }

// partialSnapshot is a snapshot being built.
type partialSnapshot struct {
	dir  string
	lock *os.File
}

// newPartialSnapshot makes the directory a snapshot is built in, locked.
func (h *Host) newPartialSnapshot(name string) (*partialSnapshot, error) {
	if err := os.MkdirAll(h.snapshotsRoot(), 0o700); err != nil {
		return nil, fmt.Errorf("create the snapshot store: %w", err)
	}
	if _, err := os.Lstat(h.snapshotDir(name)); err == nil {
		return nil, fmt.Errorf("%w: snapshot %q exists (sbx snapshot rm it, or give another name)", sbx.ErrNameInUse, name)
	}
	dir, err := os.MkdirTemp(h.snapshotsRoot(), partialPrefix+name+"-")
	if err != nil {
		return nil, fmt.Errorf("create snapshot directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, partialLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("lock snapshot directory: %w", err)
	}
	return &partialSnapshot{dir: dir, lock: f}, nil
}

// discard removes a partial snapshot.
func (p *partialSnapshot) discard() {
	_ = os.RemoveAll(p.dir)
	p.lock.Close()
}

// commit digests every file of the partial snapshot into snap, writes
// snapshot.json and moves the snapshot into place as snap.Name.
func (h *Host) commitSnapshot(p *partialSnapshot, snap *sbx.Snapshot) error {
	if err := os.Remove(filepath.Join(p.dir, partialLock)); err != nil {
		return err
	}
	files, size, err := digestTree(p.dir)
	if err != nil {
		return fmt.Errorf("digest the snapshot: %w", err)
	}
	snap.Files, snap.Bytes = files, size
	data, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(p.dir, snapshotFile), data); err != nil {
		return fmt.Errorf("write the snapshot's record: %w", err)
	}
	snap.Bytes += int64(len(data))
	if err := unix.Renameat2(unix.AT_FDCWD, p.dir, unix.AT_FDCWD, h.snapshotDir(snap.Name), unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%w: snapshot %q exists", sbx.ErrNameInUse, snap.Name)
		}
		return fmt.Errorf("move the snapshot into place: %w", err)
	}
	p.lock.Close()
	return nil
}

// writeFileSync writes data to a new file of mode 0600 and syncs it.
func writeFileSync(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// digestTree returns the sha256 of every regular file below dir (by
// slash-separated relative path, snapshot.json left out) and their total
// size. Anything but directories and regular files is an error. Every file
// is made mode 0600 and every directory 0700 on the way (CRIU writes its
// images 0644).
func digestTree(dir string) (map[string]string, int64, error) {
	files := map[string]string{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return os.Chmod(p, 0o700)
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", rel)
		case rel == snapshotFile || rel == partialLock:
			return nil
		}
		if err := os.Chmod(p, 0o600); err != nil {
			return err
		}
		sum, n, err := digestFile(p)
		if err != nil {
			return err
		}
		files[rel] = sum
		total += n
		return nil
	})
	return files, total, err
}

func digestFile(name string) (string, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}

// readSnapshot reads a snapshot's record without checking its files.
func readSnapshot(dir string) (*sbx.Snapshot, error) {
	var snap sbx.Snapshot
	if err := readJSONFile(filepath.Join(dir, snapshotFile), &snap); err != nil {
		return nil, err
	}
	if snap.Format > sbx.SnapshotFormat {
		return nil, fmt.Errorf("%w: snapshot %q has format %d, this sbx reads up to %d: restore it with a newer sbx", sbx.ErrInvalid, snap.Name, snap.Format, sbx.SnapshotFormat)
	}
	if snap.Format < 1 {
		return nil, fmt.Errorf("%w: snapshot %q has no format: not a snapshot of sbx", sbx.ErrInvalid, snap.Name)
	}
	return &snap, nil
}

func readJSONFile(name string, v any) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSnapshotRec+1))
	if err != nil {
		return err
	}
	if len(data) > maxSnapshotRec {
		return fmt.Errorf("%s is larger than %d bytes", filepath.Base(name), maxSnapshotRec)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(name), err)
	}
	return nil
}

// verifySnapshot checks that the snapshot in dir is exactly what its
// record lists: every file there with its digest, nothing else.
func verifySnapshot(dir string, snap *sbx.Snapshot) error {
	files, _, err := digestTree(dir)
	if err != nil {
		return fmt.Errorf("%w: snapshot %q: %w", sbx.ErrInvalid, snap.Name, err)
	}
	var bad []string
	for name, sum := range snap.Files {
		if got, ok := files[name]; !ok {
			bad = append(bad, name+" is missing")
		} else if got != sum {
			bad = append(bad, name+" changed")
		}
	}
	for name := range files {
		if _, ok := snap.Files[name]; !ok {
			bad = append(bad, name+" was added")
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 5 {
			bad = append(bad[:5], "...")
		}
		return fmt.Errorf("%w: snapshot %q changed on disk since it was made (%s): it cannot be restored", sbx.ErrInvalid, snap.Name, strings.Join(bad, ", "))
	}
	return nil
}

// loadSnapshot reads and verifies snapshot name.
func (h *Host) loadSnapshot(name string) (*sbx.Snapshot, *restoreInfo, error) {
	if err := sbx.ValidSnapshotName(name); err != nil {
		return nil, nil, err
	}
	dir := h.snapshotDir(name)
	snap, err := readSnapshot(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: no snapshot %q (sbx snapshot ls)", sbx.ErrNoSuchFile, name)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := verifySnapshot(dir, snap); err != nil {
		return nil, nil, err
	}
	var ri restoreInfo
	if err := readJSONFile(filepath.Join(dir, restoreFile), &ri); err != nil {
		return nil, nil, fmt.Errorf("%w: snapshot %q: %w", sbx.ErrInvalid, name, err)
	}
	return snap, &ri, nil
}

// hasSnapshot reports whether a complete snapshot called name exists.
func (h *Host) hasSnapshot(name string) bool {
	if sbx.ValidSnapshotName(name) != nil {
		return false
	}
	_, err := os.Lstat(filepath.Join(h.snapshotDir(name), snapshotFile))
	return err == nil
}

// snapshotNames lists the complete snapshots.
func (h *Host) snapshotNames() ([]string, error) {
	entries, err := os.ReadDir(h.snapshotsRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// removePartialSnapshots removes the partial snapshots no process builds
// (their builder crashed), for gc.
func (h *Host) removePartialSnapshots() (int, error) {
	entries, err := os.ReadDir(h.snapshotsRoot())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), partialPrefix) {
			continue
		}
		dir := filepath.Join(h.snapshotsRoot(), e.Name())
		f, err := os.Open(filepath.Join(dir, partialLock))
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			f.Close()
			if err != nil {
				continue // its builder is at work
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// exportSnapshot writes the snapshot in dir to w as a tar of its files.
func exportSnapshot(dir string, snap *sbx.Snapshot, w io.Writer) error {
	tw := tar.NewWriter(w)
	names := []string{snapshotFile}
	for name := range snap.Files {
		names = append(names, name)
	}
	sort.Strings(names[1:])
	for _, name := range names {
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		err = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return tw.Close()
}

// importSnapshotFiles reads a tar written by exportSnapshot into the
// partial snapshot's directory: regular files only, at clean relative
// paths of at most two components (criu/NAME).
func importSnapshotFiles(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: read the snapshot archive: %w (a truncated or damaged file?)", sbx.ErrInvalid, err)
		}
		if n > 100000 {
			return fmt.Errorf("%w: the snapshot archive has too many files", sbx.ErrInvalid)
		}
		name := hdr.Name
		clean := path.Clean(name)
		if hdr.Typeflag != tar.TypeReg || clean != name || path.IsAbs(name) || strings.HasPrefix(name, "../") || name == ".." ||
			strings.Count(name, "/") > 1 || (strings.Contains(name, "/") && !strings.HasPrefix(name, criuImagesDir+"/")) ||
			name == partialLock || seen[name] {
			return fmt.Errorf("%w: the snapshot archive holds %q, which no snapshot of sbx holds", sbx.ErrInvalid, name)
		}
		seen[name] = true
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		rerr := &readErr{r: tr}
		_, err = io.Copy(f, rerr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if rerr.err != nil {
			return fmt.Errorf("%w: read %s from the snapshot archive: %w (a truncated or damaged file?)", sbx.ErrInvalid, name, rerr.err)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if !seen[snapshotFile] {
		return fmt.Errorf("%w: the archive holds no %s: not a snapshot of sbx", sbx.ErrInvalid, snapshotFile)
	}
	return nil
}

// snapshotDefaultName names a checkpoint of sb made now.
func snapshotDefaultName(sb *sbx.Sandbox, unixNano int64) string {
	base := sb.Name
	if base == "" || sbx.ValidSnapshotName(base) != nil {
		base = sb.ShortID()
	}
	return base + "-" + strconv.FormatInt(unixNano/1e6, 10)
}

// readErr remembers the error of its reader (other than EOF), to tell a
// damaged archive from a full disk.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
