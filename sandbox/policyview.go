package sandbox

import (
	"context"
	"io"
	"net"

	"github.com/sbxrun/sbx"
)

// Create is Host.Create held to the view's policy.
func (v *PolicyView) Create(ctx context.Context, opts sbx.Options) (*sbx.Sandbox, error) {
	return v.h.create(ctx, opts, v.policy, "")
}

// List is Host.List: the policy has no part in it.
func (v *PolicyView) List(ctx context.Context, f sbx.Filter) ([]*sbx.Sandbox, error) {
	return v.h.List(ctx, f)
}

// Get is Host.Get: the policy has no part in it.
func (v *PolicyView) Get(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return v.h.Get(ctx, ref)
}

// Inspect is Host.Inspect: the policy has no part in it.
func (v *PolicyView) Inspect(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return v.h.Inspect(ctx, ref)
}

// Stats is Host.Stats: the policy has no part in it.
func (v *PolicyView) Stats(ctx context.Context, ref string) (*sbx.Usage, error) {
	return v.h.Stats(ctx, ref)
}

// Pause is Host.Pause: the policy has no part in it.
func (v *PolicyView) Pause(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return v.h.Pause(ctx, ref)
}

// Resume is Host.Resume: the policy has no part in it.
func (v *PolicyView) Resume(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return v.h.Resume(ctx, ref)
}

// Stop is Host.Stop: the policy has no part in it.
func (v *PolicyView) Stop(ctx context.Context, ref string, o sbx.StopOptions) (*sbx.Sandbox, error) {
	return v.h.Stop(ctx, ref, o)
}

// Start is Host.Start: the policy has no part in it.
func (v *PolicyView) Start(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return v.h.Start(ctx, ref)
}

// Remove is Host.Remove: the policy has no part in it.
func (v *PolicyView) Remove(ctx context.Context, ref string, o sbx.RemoveOptions) error {
	return v.h.Remove(ctx, ref, o)
}

// Logs is Host.Logs: the policy has no part in it.
func (v *PolicyView) Logs(ctx context.Context, ref string, o sbx.LogOptions, fn func(sbx.LogFrame) error) error {
	return v.h.Logs(ctx, ref, o, fn)
}

// Wait is Host.Wait: the policy has no part in it.
func (v *PolicyView) Wait(ctx context.Context, ref string) (*sbx.Exit, error) {
	return v.h.Wait(ctx, ref)
}

// Signal is Host.Signal: the policy has no part in it.
func (v *PolicyView) Signal(ctx context.Context, ref, signal string) error {
	return v.h.Signal(ctx, ref, signal)
}

// DialPort is Host.DialPort: the policy has no part in it.
func (v *PolicyView) DialPort(ctx context.Context, ref string, port int) (net.Conn, error) {
	return v.h.DialPort(ctx, ref, port)
}

// Exec is Host.Exec: the policy has no part in it.
func (v *PolicyView) Exec(ctx context.Context, ref string, req sbx.ExecRequest, onOutput func(sbx.ExecFrame) error) (sbx.ExecResult, error) {
	return v.h.Exec(ctx, ref, req, onOutput)
}

// Attach is Host.Attach: the policy has no part in it.
func (v *PolicyView) Attach(ctx context.Context, ref string, o sbx.AttachOptions) (sbx.ExecResult, error) {
	return v.h.Attach(ctx, ref, o)
}

// Dial is Host.Dial: the policy has no part in it.
func (v *PolicyView) Dial(ctx context.Context, ref string) (net.Conn, error) {
	return v.h.Dial(ctx, ref)
}

// CopyTo is Host.CopyTo: the policy has no part in it.
func (v *PolicyView) CopyTo(ctx context.Context, ref, src, dst string) error {
	return v.h.CopyTo(ctx, ref, src, dst)
}

// CopyFrom is Host.CopyFrom: the policy has no part in it.
func (v *PolicyView) CopyFrom(ctx context.Context, ref, src, dst string) error {
	return v.h.CopyFrom(ctx, ref, src, dst)
}

// Commit is Host.Commit: the policy has no part in it.
func (v *PolicyView) Commit(ctx context.Context, ref, name string) (*sbx.Image, error) {
	return v.h.Commit(ctx, ref, name)
}

// Diff is Host.Diff: the policy has no part in it.
func (v *PolicyView) Diff(ctx context.Context, ref string) ([]sbx.Change, error) {
	return v.h.Diff(ctx, ref)
}

// Top is Host.Top: the policy has no part in it.
func (v *PolicyView) Top(ctx context.Context, ref string) ([]sbx.ProcessInfo, error) {
	return v.h.Top(ctx, ref)
}

// Export is Host.Export: the policy has no part in it.
func (v *PolicyView) Export(ctx context.Context, ref string, w io.Writer) error {
	return v.h.Export(ctx, ref, w)
}

// Renew is Host.Renew: the policy has no part in it.
func (v *PolicyView) Renew(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return v.h.Renew(ctx, ref)
}

// Rename is Host.Rename: the policy has no part in it.
func (v *PolicyView) Rename(ctx context.Context, ref, name string) (*sbx.Sandbox, error) {
	return v.h.Rename(ctx, ref, name)
}

// SetEgress is Host.SetEgress: an egress policy only narrows or widens
// what the sandbox's own bridge traffic reaches, within the host's
// private-range protections.
func (v *PolicyView) SetEgress(ctx context.Context, ref string, u sbx.EgressUpdate) (*sbx.Sandbox, error) {
	return v.h.SetEgress(ctx, ref, u)
}

// Prepare is Host.Prepare held to the view's policy.
func (v *PolicyView) Prepare(ctx context.Context, o sbx.PrepareOptions) (*sbx.PrepareResult, error) {
	return v.h.prepare(ctx, o, v.policy)
}

// Run is Host.Run held to the view's policy.
func (v *PolicyView) Run(ctx context.Context, o sbx.RunOptions) (*sbx.Report, error) {
	return v.h.run(ctx, o, v.policy)
}

// GC is Host.GC: the policy has no part in it.
func (v *PolicyView) GC(ctx context.Context) (*sbx.GCReport, error) {
	return v.h.GC(ctx)
}

// Events is Host.Events: the policy has no part in it.
func (v *PolicyView) Events(ctx context.Context, since uint64, fn func(sbx.Event) error) error {
	return v.h.Events(ctx, since, fn)
}

// Info is Host.Info: the policy has no part in it.
func (v *PolicyView) Info(ctx context.Context) (*sbx.HostInfo, error) {
	return v.h.Info(ctx)
}

// DiskUsage is Host.DiskUsage: the policy has no part in it.
func (v *PolicyView) DiskUsage(ctx context.Context) (*sbx.DiskUsage, error) {
	return v.h.DiskUsage(ctx)
}

// Prune is Host.Prune: the policy has no part in it.
func (v *PolicyView) Prune(ctx context.Context, o sbx.PruneOptions) (*sbx.PruneReport, error) {
	return v.h.Prune(ctx, o)
}

// PullImage is Host.PullImage: the policy has no part in it.
func (v *PolicyView) PullImage(ctx context.Context, ref string, progress func(sbx.PullProgress)) (*sbx.Image, error) {
	return v.h.PullImage(ctx, ref, progress)
}

// ImportImage is Host.ImportImage held to the view's policy.
func (v *PolicyView) ImportImage(ctx context.Context, o sbx.ImportOptions) (*sbx.Image, error) {
	return v.h.importImage(ctx, o, v.policy)
}

// ListImages is Host.ListImages: the policy has no part in it.
func (v *PolicyView) ListImages(ctx context.Context) ([]sbx.Image, error) {
	return v.h.ListImages(ctx)
}

// InspectImage is Host.InspectImage: the policy has no part in it.
func (v *PolicyView) InspectImage(ctx context.Context, ref string) (*sbx.Image, error) {
	return v.h.InspectImage(ctx, ref)
}

// RemoveImage is Host.RemoveImage: the policy has no part in it.
func (v *PolicyView) RemoveImage(ctx context.Context, ref string) error {
	return v.h.RemoveImage(ctx, ref)
}

// GCImages is Host.GCImages: the policy has no part in it.
func (v *PolicyView) GCImages(ctx context.Context) (*sbx.ImageGCReport, error) {
	return v.h.GCImages(ctx)
}

// TagImage is Host.TagImage: the policy has no part in it.
func (v *PolicyView) TagImage(ctx context.Context, source, target string) (*sbx.Image, error) {
	return v.h.TagImage(ctx, source, target)
}

// ImageHistory is Host.ImageHistory: the policy has no part in it.
func (v *PolicyView) ImageHistory(ctx context.Context, ref string) ([]sbx.ImageHistoryEntry, error) {
	return v.h.ImageHistory(ctx, ref)
}

// SaveImage is Host.SaveImage: the policy has no part in it.
func (v *PolicyView) SaveImage(ctx context.Context, refs []string, w io.Writer) error {
	return v.h.SaveImage(ctx, refs, w)
}

// The warm pools are the host's: a pool's members start under the host's
// settings, as a server fills them, and each claim is held to the view's
// policy (Create and Claim check the request against it first).
var _ sbx.Pools = (*PolicyView)(nil)

// CreatePool is Host.CreatePool: pools are the host's.
func (v *PolicyView) CreatePool(ctx context.Context, spec sbx.PoolSpec) (*sbx.Pool, error) {
	return v.h.CreatePool(ctx, spec)
}

// ListPools is Host.ListPools: pools are the host's.
func (v *PolicyView) ListPools(ctx context.Context) ([]*sbx.Pool, error) {
	return v.h.ListPools(ctx)
}

// GetPool is Host.GetPool: pools are the host's.
func (v *PolicyView) GetPool(ctx context.Context, name string) (*sbx.Pool, error) {
	return v.h.GetPool(ctx, name)
}

// FillPool is Host.FillPool: pools are the host's.
func (v *PolicyView) FillPool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	return v.h.FillPool(ctx, name)
}

// DrainPool is Host.DrainPool: pools are the host's.
func (v *PolicyView) DrainPool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	return v.h.DrainPool(ctx, name)
}

// RemovePool is Host.RemovePool: pools are the host's.
func (v *PolicyView) RemovePool(ctx context.Context, name string) (*sbx.PoolReport, error) {
	return v.h.RemovePool(ctx, name)
}

// PoolStats is Host.PoolStats: pools are the host's.
func (v *PolicyView) PoolStats() map[string]sbx.PoolStats { return v.h.PoolStats() }

var _ sbx.Volumes = (*PolicyView)(nil)

// CreateVolume is Host.CreateVolume: a named volume is the host's own
// directory, which the policy has no part in.
func (v *PolicyView) CreateVolume(ctx context.Context, spec sbx.VolumeSpec) (*sbx.VolumeInfo, error) {
	return v.h.CreateVolume(ctx, spec)
}

// ListVolumes is Host.ListVolumes: the policy has no part in it.
func (v *PolicyView) ListVolumes(ctx context.Context) ([]*sbx.VolumeInfo, error) {
	return v.h.ListVolumes(ctx)
}

// InspectVolume is Host.InspectVolume: the policy has no part in it.
func (v *PolicyView) InspectVolume(ctx context.Context, name string) (*sbx.VolumeInfo, error) {
	return v.h.InspectVolume(ctx, name)
}

// RemoveVolume is Host.RemoveVolume: the policy has no part in it.
func (v *PolicyView) RemoveVolume(ctx context.Context, name string) error {
	return v.h.RemoveVolume(ctx, name)
}

// PruneVolumes is Host.PruneVolumes: the policy has no part in it.
func (v *PolicyView) PruneVolumes(ctx context.Context) (*sbx.VolumePruneReport, error) {
	return v.h.PruneVolumes(ctx)
}
