package sbx

import (
	"context"
	"fmt"
	"io"
	"time"
)

// SnapshotFormat is the format version of the snapshots this sbx writes;
// it refuses to restore a snapshot of a newer format.
const SnapshotFormat = 1

// Snapshot describes a checkpoint of a sandbox on disk: the memory and
// state of its processes (CRIU's images), its writable layer and its
// record. It restores on any host with the same image (by digest) or root
// directory and a CRIU 4 or later.
type Snapshot struct {
	Name    string    `json:"name"`
	Format  int       `json:"format"`
	Created time.Time `json:"created"`
	// Source is the sandbox checkpointed: its id and name then.
	SourceID   string `json:"source_id"`
	SourceName string `json:"source_name,omitempty"`
	// Options are the sandbox's options (its image by digest in Image).
	Options Options    `json:"spec"`
	Image   *ImageInfo `json:"image,omitempty"`
	// Hostname is the sandbox's hostname, which restores keep.
	Hostname string `json:"hostname"`
	// Bytes is the snapshot's size on disk; Files the digest
	// (sha256:...) of each of its files, checked before a restore.
	Bytes int64             `json:"bytes"`
	Files map[string]string `json:"files,omitempty"`
	// CRIUVersion is the CRIU that made it, e.g. "4.1.1".
	CRIUVersion string `json:"criu_version,omitempty"`
	// Timings say where the checkpoint's time went.
	DumpS  float64 `json:"dump_s,omitempty"`
	LayerS float64 `json:"layer_s,omitempty"`
}

// CheckpointOptions say how to checkpoint a sandbox.
type CheckpointOptions struct {
	// Snapshot names the snapshot [SANDBOX-NAME-or-ID-TIME].
	Snapshot string `json:"snapshot,omitempty"`
	// LeaveRunning keeps the sandbox running (it pauses for the dump and
	// the copy of its writable layer); else it is stopped, and Start
	// resumes it from the snapshot.
	LeaveRunning bool `json:"leave_running,omitempty"`
}

// RestoreOptions say how to restore a snapshot.
type RestoreOptions struct {
	// Name names the new sandbox; empty: none.
	Name string `json:"name,omitempty"`
	// Labels replace the snapshot's labels when not nil.
	Labels map[string]string `json:"labels,omitempty"`
}

// ForkOptions say how to fork a running sandbox.
type ForkOptions struct {
	// Count is how many copies to start [1].
	Count int `json:"count,omitempty"`
	// Keep keeps the snapshot the copies start from (else it is removed
	// once they run).
	Keep bool `json:"keep,omitempty"`
}

// Snapshots checkpoints sandboxes to disk and restores them: a backend
// that can implements it besides Sandboxes. Restored and forked sandboxes
// have new ids, their own writable layers and their own networks, and the
// isolation of a created sandbox.
type Snapshots interface {
	// Checkpoint writes a running sandbox's processes, writable layer and
	// record to a new snapshot.
	Checkpoint(ctx context.Context, ref string, o CheckpointOptions) (*Snapshot, error)
	// Restore starts a new sandbox from a snapshot.
	Restore(ctx context.Context, snapshot string, o RestoreOptions) (*Sandbox, error)
	// Fork starts Count copies of a running sandbox, which keeps running.
	Fork(ctx context.Context, ref string, o ForkOptions) ([]*Sandbox, error)
	// ListSnapshots returns the snapshots, oldest first.
	ListSnapshots(ctx context.Context) ([]*Snapshot, error)
	// InspectSnapshot returns one snapshot.
	InspectSnapshot(ctx context.Context, name string) (*Snapshot, error)
	// RemoveSnapshot deletes a snapshot.
	RemoveSnapshot(ctx context.Context, name string) error
	// ExportSnapshot writes a snapshot to w as one tar file.
	ExportSnapshot(ctx context.Context, name string, w io.Writer) error
	// ImportSnapshot reads a tar written by ExportSnapshot into a new
	// snapshot (its own name unless name is given).
	ImportSnapshot(ctx context.Context, r io.Reader, name string) (*Snapshot, error)
}

// ValidSnapshotName checks a snapshot name: letters, digits, '.', '_' and
// '-', starting with a letter or digit, at most 128 bytes.
func ValidSnapshotName(name string) error {
	if !validName(name, 128) {
		return fmt.Errorf("%w: snapshot name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 bytes", ErrInvalid, name)
	}
	return nil
}
