package sbx

import (
	"context"
	"fmt"
	"time"
)

// Volumes manages named volumes, as docker volume does: directories the
// host keeps under its state root, mounted by name (Volume.Name) into any
// number of sandboxes, kept after those are removed, removed only when
// asked. A create that names a volume that does not exist makes it.
// *sandbox.Host implements it on this machine, *client.Client against a
// server.
type Volumes interface {
	// CreateVolume makes the volume spec.Name; one of that name that
	// exists already is returned as it is (labels unchanged), as docker
	// volume create does.
	CreateVolume(ctx context.Context, spec VolumeSpec) (*VolumeInfo, error)
	// ListVolumes returns every volume, by name.
	ListVolumes(ctx context.Context) ([]*VolumeInfo, error)
	// InspectVolume returns one volume (ErrNotFound when there is none).
	InspectVolume(ctx context.Context, name string) (*VolumeInfo, error)
	// RemoveVolume removes a volume and its files; ErrState while a
	// sandbox (running or not) has it mounted.
	RemoveVolume(ctx context.Context, name string) error
	// PruneVolumes removes every volume no sandbox has.
	PruneVolumes(ctx context.Context) (*VolumePruneReport, error)
}

// VolumeSpec is what CreateVolume makes (the body of POST /v1/volumes).
type VolumeSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// VolumeInfo is a named volume. Mountpoint is its directory on the host;
// UsedBy are the sandboxes (ids) that have it, then the one-shot runs
// (run-<id>) that mount it while they run.
type VolumeInfo struct {
	Name       string            `json:"name"`
	Mountpoint string            `json:"mountpoint"`
	Created    time.Time         `json:"created"`
	Labels     map[string]string `json:"labels,omitempty"`
	UsedBy     []string          `json:"used_by,omitempty"`
}

// VolumePruneReport says which volumes PruneVolumes removed.
type VolumePruneReport struct {
	Removed []string `json:"removed,omitempty"`
}

// ValidVolumeName checks a volume name as docker does: letters, digits,
// '.', '_' and '-', starting with a letter or digit, at least two
// characters, at most 64. The error wraps ErrInvalid.
func ValidVolumeName(name string) error {
	if err := checkVolumeName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func checkVolumeName(name string) error {
	if len(name) < 2 || !validName(name, 64) {
		return fmt.Errorf("volume name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit, 2 to 64 bytes (a host directory is a path: ./%s or /abs/path)", name, name)
	}
	return nil
}

// IsVolumeName reports whether the source of a -v SOURCE:PATH names a
// volume rather than a host directory, as docker tells them apart: a
// path has a '/' (or is "." or ".."), a name has none.
func IsVolumeName(source string) bool {
	return source != "." && source != ".." && !containsSlash(source)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}
