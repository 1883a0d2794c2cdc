package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sbxrun/sbx/cgroup"
	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
	"github.com/sbxrun/sbx/server/client"
)

// remoteHost is --host / SBX_HOST: when set, the sandbox commands act on
// that sbx server instead of the local state.
var remoteHost string

func init() {
	rootCmd.PersistentFlags().StringVarP(&remoteHost, "host", "H", os.Getenv("SBX_HOST"),
		"act on the sbx server at this address instead of local state: unix:///path, http(s)://host:port (token from SBX_TOKEN or SBX_TOKEN_FILE)")
}

// sandboxBackend is what the sandbox commands (create, ps, inspect, stats,
// pause, resume, start, stop, rm) need. *sandbox.Manager is the local one;
// remoteSandboxes talks to a server.
type sandboxBackend interface {
	Create(ctx context.Context, opts sandbox.Options) (*sandbox.Sandbox, error)
	List(ctx context.Context, f sandbox.Filter) ([]*sandbox.Sandbox, error)
	Get(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Inspect(ctx context.Context, ref string) (*sandbox.Info, error)
	Stats(ctx context.Context, ref string) (*cgroup.Usage, error)
	Pause(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Resume(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Start(ctx context.Context, ref string) (*sandbox.Sandbox, error)
	Stop(ctx context.Context, ref string, timeout time.Duration) (*sandbox.Sandbox, error)
	Remove(ctx context.Context, ref string, force bool) error
	// Dial connects to the sandbox's executor: its socket locally, a
	// tunnel through the server remotely. executor/client.NewWithDialer
	// over it gives exec, sessions and files either way.
	Dial(ctx context.Context, ref string) (net.Conn, error)
	// Exec runs a command through the executor, streaming its output to
	// onOutput when given.
	Exec(ctx context.Context, ref string, req execapi.ExecRequest, onOutput func(execapi.ExecFrame) error) (execapi.ExecResult, error)
	// CopyFrom and CopyTo copy between the sandbox and this host.
	CopyFrom(ctx context.Context, ref, src, dst string) error
	CopyTo(ctx context.Context, ref, src, dst string) error
}

// openSandboxes returns the remote server of --host (SBX_HOST) when one is
// given, else the local Manager.
func openSandboxes() (sandboxBackend, error) {
	if remoteHost == "" {
		return openManager()
	}
	c, err := remoteClient()
	if err != nil {
		return nil, err
	}
	return remoteSandboxes{c}, nil
}

// remoteClient connects to --host with the token of SBX_TOKEN or the file
// SBX_TOKEN_FILE.
func remoteClient() (*client.Client, error) {
	token := os.Getenv("SBX_TOKEN")
	if f := os.Getenv("SBX_TOKEN_FILE"); token == "" && f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read SBX_TOKEN_FILE: %w", err)
		}
		token = strings.TrimSpace(string(data))
	}
	return client.New(remoteHost, client.Options{Token: token})
}

// remoteSandboxes is a sandboxBackend over the REST API.
type remoteSandboxes struct{ c *client.Client }

// remoteErr maps a server error to the Manager's errors, so remote
// commands exit with the same codes as local ones.
func remoteErr(err error) error {
	var base error
	switch client.StatusOf(err) {
	case 0:
		return err // nil, or not an error reply
	case http.StatusNotFound:
		base = sandbox.ErrNotFound
	case http.StatusConflict:
		base = sandbox.ErrState
	case http.StatusTooManyRequests:
		base = sandbox.ErrLimit
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		base = sandbox.ErrInvalid
	default:
		return err
	}
	return fmt.Errorf("%w (%w)", err, base)
}

// convert decodes the server's JSON form of a record into the Manager's
// type; they share the wire format.
func convert[T any](v any) (*T, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("unexpected reply from the sbx server: %w", err)
	}
	return &out, nil
}

func (r remoteSandboxes) Create(ctx context.Context, o sandbox.Options) (*sandbox.Sandbox, error) {
	req := api.CreateRequest{
		Name: o.Name, Image: o.Image, Rootfs: o.Rootfs, Env: o.Env, Workdir: o.Workdir, User: o.User,
		Hostname: o.Hostname, Network: o.Network, Labels: o.Labels, TTL: api.Duration(o.TTL),
		Publish: o.Publish, Egress: o.Egress, AllowHostPorts: o.AllowHostPorts, DNS: o.DNS,
		ReadonlyRootfs: o.ReadonlyRootfs, CapAdd: o.CapAdd, CapDrop: o.CapDrop, Seccomp: o.Seccomp,
		Limits: api.Limits{Memory: api.Size(o.Limits.MemoryBytes), CPUs: o.Limits.CPUs, Pids: o.Limits.Pids, Disk: api.Size(o.Limits.DiskBytes)},
	}
	for _, v := range o.Volumes {
		req.Volumes = append(req.Volumes, api.Volume{HostPath: v.HostPath, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	for _, t := range o.Tmpfs {
		req.Tmpfs = append(req.Tmpfs, api.Tmpfs{Path: t.Path, Size: api.Size(t.SizeBytes)})
	}
	sb, err := r.c.CreateSandbox(ctx, req)
	if err != nil {
		return nil, remoteErr(err)
	}
	return convert[sandbox.Sandbox](sb)
}

func (r remoteSandboxes) List(ctx context.Context, f sandbox.Filter) ([]*sandbox.Sandbox, error) {
	list, err := r.c.ListSandboxes(ctx, client.ListOptions{Labels: f.Labels, Status: string(f.Status), Running: f.Running})
	if err != nil {
		return nil, remoteErr(err)
	}
	out := make([]*sandbox.Sandbox, 0, len(list))
	for i := range list {
		sb, err := convert[sandbox.Sandbox](&list[i])
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, nil
}

func (r remoteSandboxes) Get(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	return r.record(r.c.GetSandbox(ctx, ref))
}

func (r remoteSandboxes) Inspect(ctx context.Context, ref string) (*sandbox.Info, error) {
	sb, err := r.c.GetSandbox(ctx, ref)
	if err != nil {
		return nil, remoteErr(err)
	}
	return convert[sandbox.Info](sb)
}

func (r remoteSandboxes) record(sb *api.Sandbox, err error) (*sandbox.Sandbox, error) {
	if err != nil {
		return nil, remoteErr(err)
	}
	return convert[sandbox.Sandbox](sb)
}

func (r remoteSandboxes) Stats(ctx context.Context, ref string) (*cgroup.Usage, error) {
	st, err := r.c.SandboxStats(ctx, ref)
	if err != nil {
		return nil, remoteErr(err)
	}
	return convert[cgroup.Usage](st)
}

func (r remoteSandboxes) Pause(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	return r.record(r.c.PauseSandbox(ctx, ref))
}

func (r remoteSandboxes) Resume(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	return r.record(r.c.ResumeSandbox(ctx, ref))
}

func (r remoteSandboxes) Start(ctx context.Context, ref string) (*sandbox.Sandbox, error) {
	return r.record(r.c.StartSandbox(ctx, ref))
}

func (r remoteSandboxes) Stop(ctx context.Context, ref string, timeout time.Duration) (*sandbox.Sandbox, error) {
	return r.record(r.c.StopSandbox(ctx, ref, timeout))
}

func (r remoteSandboxes) Dial(ctx context.Context, ref string) (net.Conn, error) {
	c, err := r.c.DialExecutor(ctx, ref)
	return c, remoteErr(err)
}

func (r remoteSandboxes) Exec(ctx context.Context, ref string, req execapi.ExecRequest, onOutput func(execapi.ExecFrame) error) (execapi.ExecResult, error) {
	ex := r.c.Executor(ref, execclient.Options{})
	defer ex.Close()
	var res execapi.ExecResult
	var err error
	if onOutput == nil {
		res, err = ex.Exec(ctx, req)
	} else {
		res, err = ex.ExecStream(ctx, req, onOutput)
	}
	return res, remoteErr(err)
}

func (r remoteSandboxes) CopyFrom(ctx context.Context, ref, src, dst string) error {
	ex := r.c.Executor(ref, execclient.Options{})
	defer ex.Close()
	return remoteErr(sandbox.CopyFromExecutor(ctx, ex, src, dst))
}

func (r remoteSandboxes) CopyTo(ctx context.Context, ref, src, dst string) error {
	ex := r.c.Executor(ref, execclient.Options{})
	defer ex.Close()
	return remoteErr(sandbox.CopyToExecutor(ctx, ex, src, dst))
}

func (r remoteSandboxes) Remove(ctx context.Context, ref string, force bool) error {
	return remoteErr(r.c.RemoveSandbox(ctx, ref, force))
}
