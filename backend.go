package sbx

import (
	"context"
	"io"
	"net"
)

// Sandboxes runs and manages sandboxes. A sandbox is named by its id, a
// unique prefix of the id, or its name (ref). *sandbox.Host implements it
// on this machine, *client.Client (package server/client) against a
// server. Every method is safe for concurrent use.
type Sandboxes interface {
	// Create makes a sandbox and starts it, returning once its executor
	// answers (and Options.Cmd, if any, has started). On error nothing is
	// left behind.
	Create(ctx context.Context, opts Options) (*Sandbox, error)
	// List returns the sandboxes f selects, oldest first.
	List(ctx context.Context, f Filter) ([]*Sandbox, error)
	// Get returns a sandbox's record.
	Get(ctx context.Context, ref string) (*Sandbox, error)
	// Inspect returns the record with what only the host can tell now
	// (Pids).
	Inspect(ctx context.Context, ref string) (*Sandbox, error)
	// Stats reads what a running or paused sandbox uses now.
	Stats(ctx context.Context, ref string) (*Usage, error)
	// Pause freezes every process of a sandbox; Resume thaws them.
	Pause(ctx context.Context, ref string) (*Sandbox, error)
	Resume(ctx context.Context, ref string) (*Sandbox, error)
	// Stop sends PID 1 a signal and kills it after a timeout; the root
	// file system stays, and Start runs the sandbox again on it.
	Stop(ctx context.Context, ref string, o StopOptions) (*Sandbox, error)
	Start(ctx context.Context, ref string) (*Sandbox, error)
	// Remove releases everything the sandbox created and forgets it.
	Remove(ctx context.Context, ref string, o RemoveOptions) error

	// Logs calls fn with the output of the sandbox's main command
	// (Options.Cmd) as o selects, ending with a LogEnd frame. An error
	// from fn ends the stream and is returned as it is.
	Logs(ctx context.Context, ref string, o LogOptions, fn func(LogFrame) error) error
	// Wait waits until the main command has ended for good and says how;
	// it works from any process, also after the executor is gone.
	Wait(ctx context.Context, ref string) (*Exit, error)
	// Signal sends a signal ("SIGTERM") to the main command.
	Signal(ctx context.Context, ref, signal string) error
	// DialPort connects to a TCP port inside the sandbox's network
	// (127.0.0.1:port in its namespace), as a port-forward does.
	DialPort(ctx context.Context, ref string, port int) (net.Conn, error)

	// Exec runs a command through the sandbox's executor. With onOutput
	// the output is streamed to it as it is produced (stdout and stderr
	// frames); the result comes last either way. Cancelling ctx returns at
	// once and stops the command: req.StopSignal (SIGTERM) to its process
	// group, SIGKILL req.StopGrace later.
	Exec(ctx context.Context, ref string, req ExecRequest, onOutput func(ExecFrame) error) (ExecResult, error)
	// Attach runs an interactive command: input streamed, a terminal
	// with Tty. Cancelling ctx stops the command as for Exec.
	Attach(ctx context.Context, ref string, o AttachOptions) (ExecResult, error)
	// Dial connects to the sandbox's executor (its HTTP API on a unix
	// socket, or a tunnel through the server), for executor/client's
	// sessions, files and archives.
	Dial(ctx context.Context, ref string) (net.Conn, error)
	// CopyTo copies src on the caller's machine into the sandbox at dst,
	// CopyFrom src in the sandbox to dst on the caller's machine, as
	// docker cp does (into dst when it is an existing directory).
	CopyTo(ctx context.Context, ref, src, dst string) error
	CopyFrom(ctx context.Context, ref, src, dst string) error
	// Commit stores the sandbox's writable layer as a new image called
	// name, on top of its image.
	Commit(ctx context.Context, ref, name string) (*Image, error)
	// Diff lists what the sandbox changed in its root file system over
	// its image or root directory (its writable layer), sorted by path.
	Diff(ctx context.Context, ref string) ([]Change, error)
	// Top lists the processes of a running sandbox (docker top).
	Top(ctx context.Context, ref string) ([]ProcessInfo, error)
	// Export writes the sandbox's root file system (its image with its
	// changes) to w as one tar (docker export).
	Export(ctx context.Context, ref string, w io.Writer) error
	// Renew renews the owner lease of a sandbox created with
	// Options.Lease: it now expires Lease from now (never after its TTL).
	// ErrState for a sandbox without a lease.
	Renew(ctx context.Context, ref string) (*Sandbox, error)
	// Rename gives a sandbox a new unique name ("" drops its name).
	Rename(ctx context.Context, ref, name string) (*Sandbox, error)
	// SetEgress replaces the egress policy of a bridged sandbox while it
	// lives: its rules change in one batch, and the egress daemon reads
	// the new policy at the next connection or query.
	SetEgress(ctx context.Context, ref string, u EgressUpdate) (*Sandbox, error)
	// Prepare returns an image that is Base after Script ran in it,
	// building it only once for the same inputs.
	Prepare(ctx context.Context, o PrepareOptions) (*PrepareResult, error)

	// Run runs one command in a fresh sandbox and removes it: create,
	// start, wait and remove. An error means sbx failed; the command's
	// own failures are in the Report.
	Run(ctx context.Context, o RunOptions) (*Report, error)

	// GC removes what crashes left behind and sandboxes whose TTL passed.
	GC(ctx context.Context) (*GCReport, error)
	// Events calls fn with every event after sequence number since (0:
	// only new ones; EventsBuffered: all the host still holds), in order,
	// until ctx ends or fn fails. A since the host does not know (it
	// restarted, or the events left its buffer) starts with EventReset.
	Events(ctx context.Context, since uint64, fn func(Event) error) error
	// Info reports the host's facts.
	Info(ctx context.Context) (*HostInfo, error)
	// DiskUsage says what images, layers and sandboxes hold (docker
	// system df).
	DiskUsage(ctx context.Context) (*DiskUsage, error)
	// Prune removes exited sandboxes (stopped, or whose main command
	// ended), then (with o.All) the images no
	// sandbox uses, then the layers no image uses (docker system prune).
	Prune(ctx context.Context, o PruneOptions) (*PruneReport, error)
}

// Backend is all a host offers, for code that takes either backend:
// *sandbox.Host on this machine and *client.Client (package server/client)
// against a server both implement it (the build fails otherwise). A
// program that only talks to a server imports the contract and
// server/client, and builds without cgo.
type Backend interface {
	Sandboxes
	Images
	Pools
	Snapshots
	Builder
	Volumes
}

// Images manages the image cache of a host. Its method names say "Image"
// so that one type can implement both interfaces.
type Images interface {
	// PullImage fetches ref from its registry, reporting progress (never
	// concurrently) if progress is not nil.
	PullImage(ctx context.Context, ref string, progress func(PullProgress)) (*Image, error)
	// ImportImage adds an image from an archive or layout on the caller's
	// machine.
	ImportImage(ctx context.Context, o ImportOptions) (*Image, error)
	// ListImages returns the cached images.
	ListImages(ctx context.Context) ([]Image, error)
	// InspectImage returns one image in full: config, diffIDs, layers.
	InspectImage(ctx context.Context, ref string) (*Image, error)
	// RemoveImage drops ref from the cache (its layers stay until
	// GCImages).
	RemoveImage(ctx context.Context, ref string) error
	// GCImages removes the layers no image and no sandbox uses.
	GCImages(ctx context.Context) (*ImageGCReport, error)
	// TagImage gives the cached image source the further name target
	// (NAME[:TAG]); the layers are shared, an image named target before
	// loses that name.
	TagImage(ctx context.Context, source, target string) (*Image, error)
	// ImageHistory says how an image was built, newest step first.
	ImageHistory(ctx context.Context, ref string) ([]ImageHistoryEntry, error)
	// SaveImage writes the images refs to w as one OCI image layout
	// archive (tar), which ImportImage (sbx load), skopeo and docker load
	// read back.
	SaveImage(ctx context.Context, refs []string, w io.Writer) error
}
