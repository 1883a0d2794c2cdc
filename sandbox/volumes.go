package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/errkind"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Named volumes live under the state root, one directory each:
// volumes/NAME/volume.json (when it was made, its labels) and
// volumes/NAME/_data, the directory sandboxes mount. volumes/ is 0700,
// so no host user but root reaches what a sandbox wrote there (a volume
// is mounted nosuid and nodev, id-mapped to the host's ids in a private
// user namespace). Creates and removes of volumes hold volumes/.lock; a
// volume being made or removed is a dot-name (.NAME.new, .NAME.removing)
// that GC removes after a crash.
const (
	volumesDir     = "volumes"
	volumeMetaFile = "volume.json"
	volumeDataDir  = "_data"
	volumeMetaMax  = 64 << 10
)

var _ sbx.Volumes = (*Host)(nil)

// volumeMeta is a volume's volume.json.
type volumeMeta struct {
	Created time.Time         `json:"created"`
	Labels  map[string]string `json:"labels,omitempty"`
	// MadeFor is the sandbox (or run) whose create made the volume on
	// first use, none if a volume create made it or it was taken over
	// (a volume create of its name, another sandbox or run using it): gc
	// drops the volume with that sandbox if its create never finished
	// (dropVolumesOfKilledCreate).
	MadeFor string `json:"made_for,omitempty"`
}

func (h *Host) volumesRoot() string { return filepath.Join(h.store.Root(), volumesDir) }

func (h *Host) volumeDir(name string) string { return filepath.Join(h.volumesRoot(), name) }

// lockVolumes takes the lock of every volume create and remove, making
// volumes/ if needed.
func (h *Host) lockVolumes(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(h.volumesRoot(), 0o700); err != nil {
		return nil, fmt.Errorf("make the volumes directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(h.volumesRoot(), ".lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the volumes: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock the volumes: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// CreateVolume makes a named volume, or returns the one of that name.
func (h *Host) CreateVolume(ctx context.Context, spec sbx.VolumeSpec) (*sbx.VolumeInfo, error) {
	if err := sbx.ValidVolumeName(spec.Name); err != nil {
		return nil, err
	}
	for k := range spec.Labels {
		if k == "" || strings.ContainsAny(k, "=\n") {
			return nil, fmt.Errorf("%w: label key %q must be non-empty without '=' or newlines", sbx.ErrInvalid, k)
		}
	}
	unlock, err := h.lockVolumes(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := h.makeVolume(spec, ""); err != nil {
		return nil, err
	}
	// One a create made on first use is the user's from now on.
	if err := h.takeOverVolume(spec.Name); err != nil {
		return nil, err
	}
	return h.InspectVolume(ctx, spec.Name)
}

// makeVolume makes the volume spec.Name unless it exists, under the
// volumes' lock: in a dot-directory first, renamed into place whole.
// madeFor is the sandbox whose create makes it on first use (volumeMeta).
func (h *Host) makeVolume(spec sbx.VolumeSpec, madeFor string) error {
	dir := h.volumeDir(spec.Name)
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	tmp := filepath.Join(h.volumesRoot(), "."+spec.Name+".new")
	_ = os.RemoveAll(tmp)
	err := os.Mkdir(tmp, 0o700)
	if err == nil {
		err = os.Mkdir(filepath.Join(tmp, volumeDataDir), 0o755)
	}
	if err == nil {
		var data []byte
		data, err = json.Marshal(volumeMeta{Created: h.now().UTC(), Labels: spec.Labels, MadeFor: madeFor})
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, volumeMetaFile), data, 0o600)
		}
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("make volume %s: %w", spec.Name, err)
	}
	return nil
}

// ListVolumes returns every volume, by name.
func (h *Host) ListVolumes(ctx context.Context) ([]*sbx.VolumeInfo, error) {
	entries, err := os.ReadDir(h.volumesRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	users, err := h.volumeUsers(ctx)
	if err != nil {
		return nil, err
	}
	var out []*sbx.VolumeInfo
	for _, e := range entries {
		if !e.IsDir() || sbx.ValidVolumeName(e.Name()) != nil {
			continue
		}
		v, err := h.readVolume(e.Name(), users)
		if errors.Is(err, sbx.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// InspectVolume returns one volume.
func (h *Host) InspectVolume(ctx context.Context, name string) (*sbx.VolumeInfo, error) {
	if err := sbx.ValidVolumeName(name); err != nil {
		return nil, err
	}
	users, err := h.volumeUsers(ctx)
	if err != nil {
		return nil, err
	}
	return h.readVolume(name, users)
}

func (h *Host) readVolume(name string, users map[string][]string) (*sbx.VolumeInfo, error) {
	dir := h.volumeDir(name)
	f, err := os.Open(filepath.Join(dir, volumeMetaFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errkind.New(fmt.Sprintf("no volume %s (sbx volume ls lists them)", name), sbx.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("volume %s: %w", name, err)
	}
	defer f.Close()
	m, err := decodeVolumeMeta(name, f)
	if err != nil {
		return nil, err
	}
	return &sbx.VolumeInfo{Name: name, Mountpoint: filepath.Join(dir, volumeDataDir), Created: m.Created, Labels: m.Labels, UsedBy: users[name]}, nil
}

func decodeVolumeMeta(name string, r io.Reader) (*volumeMeta, error) {
	var m volumeMeta
	if err := json.NewDecoder(io.LimitReader(r, volumeMetaMax)).Decode(&m); err != nil {
		return nil, fmt.Errorf("volume %s: its %s is damaged (%v); sbx volume rm it", name, volumeMetaFile, err)
	}
	return &m, nil
}

// volumeMadeFor reads the sandbox whose create made volume name
// (volumeMeta.MadeFor).
func (h *Host) volumeMadeFor(name string) (string, error) {
	f, err := os.Open(filepath.Join(h.volumeDir(name), volumeMetaFile))
	if err != nil {
		return "", err
	}
	defer f.Close()
	m, err := decodeVolumeMeta(name, f)
	if err != nil {
		return "", err
	}
	return m.MadeFor, nil
}

// takeOverVolume forgets which create made volume name, under the
// volumes' lock: a volume create of its name, or another sandbox or run
// that uses it (keepVolumes), makes it the user's.
func (h *Host) takeOverVolume(name string) error {
	path := filepath.Join(h.volumeDir(name), volumeMetaFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	m, err := decodeVolumeMeta(name, strings.NewReader(string(data)))
	if err != nil || m.MadeFor == "" {
		return err
	}
	m.MadeFor = ""
	if data, err = json.Marshal(m); err == nil {
		err = os.WriteFile(path, data, 0o600)
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// volumeUsers maps each volume name to the sandboxes (ids, oldest first)
// whose options name it: every sandbox of the root, pool members and
// stopped ones included, then the one-shot runs (run-<id>) that mount it
// while they run.
func (h *Host) volumeUsers(ctx context.Context) (map[string][]string, error) {
	list, err := h.list(ctx, sbx.Filter{Pooled: true}, true)
	if err != nil {
		return nil, err
	}
	users := map[string][]string{}
	for _, sb := range list {
		for _, v := range sb.Options.Volumes {
			if v.Name != "" && !slices.Contains(users[v.Name], sb.ID) {
				users[v.Name] = append(users[v.Name], sb.ID)
			}
		}
	}
	runs, err := liveRunVolumes(h.store.RunRoot())
	if err != nil {
		return nil, err
	}
	for name, ids := range runs {
		users[name] = append(users[name], ids...)
	}
	return users, nil
}

// RemoveVolume removes a volume no sandbox has, with its files.
func (h *Host) RemoveVolume(ctx context.Context, name string) error {
	if err := sbx.ValidVolumeName(name); err != nil {
		return err
	}
	unlock, err := h.lockVolumes(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	v, err := h.InspectVolume(ctx, name)
	if err != nil {
		return err
	}
	if len(v.UsedBy) > 0 {
		return fmt.Errorf("%w: volume %s is in use by sandbox %s: remove it first (sbx rm)", sbx.ErrState, name, shortID(v.UsedBy[0]))
	}
	return h.dropVolume(name)
}

// dropVolume removes the volume name, under the volumes' lock: renamed
// out of the way first, so a crash midway leaves a dot-name GC removes.
func (h *Host) dropVolume(name string) error {
	gone := filepath.Join(h.volumesRoot(), "."+name+".removing")
	_ = os.RemoveAll(gone)
	if err := os.Rename(h.volumeDir(name), gone); err != nil {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("remove volume %s: %w (sbx gc finishes it)", name, err)
	}
	h.log.Info("removed volume", "name", name)
	return nil
}

// PruneVolumes removes every volume no sandbox has.
func (h *Host) PruneVolumes(ctx context.Context) (*sbx.VolumePruneReport, error) {
	unlock, err := h.lockVolumes(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	list, err := h.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	rep := &sbx.VolumePruneReport{}
	var errs []error
	for _, v := range list {
		if len(v.UsedBy) > 0 {
			continue
		}
		if err := h.dropVolume(v.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Removed = append(rep.Removed, v.Name)
	}
	return rep, errors.Join(errs...)
}

// resolveVolumes points the named volumes of o at their directories and
// id-maps them to the host's ids. A HostPath given with a name is
// replaced: only the host says where a volume lives. It makes nothing: a
// create that is only checked (a pool's definition, a miss reason) leaves
// no volume behind; keepVolumes makes those that do not exist yet (as
// docker run -v NAME:/path does) once a sandbox is recorded with them.
func (h *Host) resolveVolumes(o *sbx.Options) {
	if !slices.ContainsFunc(o.Volumes, func(v sbx.Volume) bool { return v.Name != "" }) {
		return
	}
	vols := slices.Clone(o.Volumes)
	for i, v := range vols {
		if v.Name != "" {
			vols[i].HostPath, vols[i].IDMap = filepath.Join(h.volumeDir(v.Name), volumeDataDir), sbx.VolumeIDMapHost
		}
	}
	o.Volumes = vols
}

// keepVolumes makes sure, under the volumes' lock, that the named
// volumes of o exist, making those that do not (never made, or removed
// by a volume rm or prune since), and returns the names it made (also on
// error): a create that fails drops them again (dropMadeVolumes). Call
// it once the record (or run file) naming them is written and before
// they are mounted: from then on rm and prune see the volumes in use, and
// before it they have either finished or not begun, so a sandbox never
// mounts a volume being removed.
func (h *Host) keepVolumes(ctx context.Context, id string, o *sbx.Options) ([]string, error) {
	if !slices.ContainsFunc(o.Volumes, func(v sbx.Volume) bool { return v.Name != "" }) {
		return nil, nil
	}
	unlock, err := h.lockVolumes(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var made []string
	for _, v := range o.Volumes {
		if v.Name == "" || slices.Contains(made, v.Name) {
			continue
		}
		if _, err := os.Lstat(h.volumeDir(v.Name)); err == nil {
			// One that another create made on first use, killed before
			// gc undid it, is this user's from now on: gc must not drop
			// what this sandbox or run writes into it once it is gone.
			if madeFor, err := h.volumeMadeFor(v.Name); err == nil && madeFor != "" && madeFor != id {
				if err := h.takeOverVolume(v.Name); err != nil {
					return made, err
				}
			}
			continue
		}
		if err := h.makeVolume(sbx.VolumeSpec{Name: v.Name}, id); err != nil {
			return made, err
		}
		made = append(made, v.Name)
	}
	return made, nil
}

// dropMadeVolumes removes the volumes made (by keepVolumes) for a create
// or run that then failed and is gone, unless another sandbox or run
// names them by now: a failed create leaves no volume it made. Failures
// are logged (the volume stays, for volume rm or prune).
func (h *Host) dropMadeVolumes(ctx context.Context, made []string) {
	if len(made) == 0 {
		return
	}
	unlock, err := h.lockVolumes(ctx)
	if err != nil {
		h.log.Warn("remove the volumes a failed create made", "volumes", made, "err", err)
		return
	}
	defer unlock()
	users, err := h.volumeUsers(ctx)
	if err != nil {
		h.log.Warn("remove the volumes a failed create made", "volumes", made, "err", err)
		return
	}
	for _, name := range made {
		if len(users[name]) > 0 {
			continue
		}
		if err := h.dropVolume(name); err != nil {
			h.log.Warn("remove a volume a failed create made", "volume", name, "err", err)
		}
	}
}

// dropVolumesOfKilledCreate removes the volumes that the create of sb,
// killed and now undone (its record gone), made on first use, unless
// another sandbox or run names them by now: gc finishes what the create
// would have done had it failed (dropMadeVolumes). A volume that existed
// before, or that a volume create or another sandbox or run took over
// since (even one gone by now), is never removed. It
// returns the names removed; failures are logged.
func (h *Host) dropVolumesOfKilledCreate(ctx context.Context, sb *sbx.Sandbox) []string {
	var names []string
	for _, v := range sb.Options.Volumes {
		if v.Name != "" && !slices.Contains(names, v.Name) && sbx.ValidVolumeName(v.Name) == nil {
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	unlock, err := h.lockVolumes(ctx)
	if err != nil {
		h.log.Warn("remove the volumes a killed create made", "id", sb.ID, "err", err)
		return nil
	}
	defer unlock()
	users, err := h.volumeUsers(ctx)
	if err != nil {
		h.log.Warn("remove the volumes a killed create made", "id", sb.ID, "err", err)
		return nil
	}
	var dropped []string
	for _, name := range names {
		if madeFor, err := h.volumeMadeFor(name); err != nil || madeFor != sb.ID || len(users[name]) > 0 {
			continue
		}
		if err := h.dropVolume(name); err != nil {
			h.log.Warn("remove a volume a killed create made", "volume", name, "err", err)
			continue
		}
		dropped = append(dropped, name)
	}
	return dropped
}

// writeKeepingVolumes writes the record sb, which names the volumes it
// is about to mount, then keeps those volumes (keepVolumes).
func (h *Host) writeKeepingVolumes(ctx context.Context, l *state.Lock, sb *sbx.Sandbox) error {
	if err := l.Write(sb); err != nil {
		return err
	}
	_, err := h.keepVolumes(ctx, sb.ID, &sb.Options)
	return err
}

// sweepVolumeDebris removes what a volume create or remove that died
// midway left (dot-names), returning their names.
func (h *Host) sweepVolumeDebris(ctx context.Context) []string {
	entries, err := os.ReadDir(h.volumesRoot())
	if err != nil {
		return nil
	}
	unlock, err := h.lockVolumes(ctx)
	if err != nil {
		return nil
	}
	defer unlock()
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") && (strings.HasSuffix(n, ".new") || strings.HasSuffix(n, ".removing")) {
			if os.RemoveAll(filepath.Join(h.volumesRoot(), n)) == nil {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
