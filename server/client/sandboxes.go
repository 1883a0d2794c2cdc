package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	execclient "github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/server/api"
)

func sandboxURL(ref, suffix string) string { return "/v1/sandboxes/" + url.PathEscape(ref) + suffix }

// Create creates a sandbox on the server and returns it once its executor
// answers (POST /v1/sandboxes). Host mode (neither Image nor Rootfs) needs
// the server's own host: sbx.ErrUnsupported.
func (c *Client) Create(ctx context.Context, opts sbx.Options) (*sbx.Sandbox, error) {
	if opts.Image == "" && opts.Rootfs == "" {
		return nil, fmt.Errorf("%w: host mode needs this host; against a server give an image or a rootfs (a directory on the server)", sbx.ErrUnsupported)
	}
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, "/v1/sandboxes", opts, &sb)
}

// List lists the server's sandboxes that f selects, oldest first.
func (c *Client) List(ctx context.Context, f sbx.Filter) ([]*sbx.Sandbox, error) {
	q := url.Values{}
	for k, v := range f.Labels {
		q.Add("label", k+"="+v)
	}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	if f.Running {
		q.Set("running", "true")
	}
	if f.Pooled {
		q.Set("pooled", "true")
	}
	path := "/v1/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l api.SandboxList
	return l.Sandboxes, c.Call(ctx, http.MethodGet, path, nil, &l)
}

// Get returns the sandbox ref (id, unique id prefix or name).
func (c *Client) Get(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.Inspect(ctx, ref)
}

// Inspect returns the sandbox ref with its processes.
func (c *Client) Inspect(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodGet, sandboxURL(ref, ""), nil, &sb)
}

// Stats returns what a sandbox uses now.
func (c *Client) Stats(ctx context.Context, ref string) (*sbx.Usage, error) {
	var u sbx.Usage
	return &u, c.Call(ctx, http.MethodGet, sandboxURL(ref, "/stats"), nil, &u)
}

func (c *Client) change(ctx context.Context, ref, op string, in any) (*sbx.Sandbox, error) {
	var sb sbx.Sandbox
	return &sb, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/"+op), in, &sb)
}

// Pause freezes every process of a sandbox.
func (c *Client) Pause(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "pause", nil)
}

// Resume thaws a paused sandbox.
func (c *Client) Resume(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "resume", nil)
}

// Start starts a stopped sandbox again.
func (c *Client) Start(ctx context.Context, ref string) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "start", nil)
}

// Stop sends o.Signal (SIGTERM) to the sandbox's PID 1 and SIGKILL after
// o.Timeout (the server's default when zero).
func (c *Client) Stop(ctx context.Context, ref string, o sbx.StopOptions) (*sbx.Sandbox, error) {
	return c.change(ctx, ref, "stop", api.StopRequest{Timeout: sbx.Duration(o.Timeout), Signal: o.Signal})
}

// Remove removes a sandbox; without o.Force a running one is refused
// (sbx.ErrState).
func (c *Client) Remove(ctx context.Context, ref string, o sbx.RemoveOptions) error {
	return c.Call(ctx, http.MethodDelete, sandboxURL(ref, "?force="+strconv.FormatBool(o.Force)), nil, nil)
}

// Dial opens a tunnel to the sandbox's executor (DialExecutor).
func (c *Client) Dial(ctx context.Context, ref string) (net.Conn, error) {
	return c.DialExecutor(ctx, ref)
}

// Exec runs a command through the sandbox's executor, reached through a
// tunnel, streaming its output to onOutput when given.
func (c *Client) Exec(ctx context.Context, ref string, req sbx.ExecRequest, onOutput func(sbx.ExecFrame) error) (sbx.ExecResult, error) {
	ex := c.Executor(ref, execclient.Options{})
	defer ex.Close()
	if onOutput == nil {
		return ex.Exec(ctx, req)
	}
	return ex.ExecStream(ctx, req, onOutput)
}

// Attach runs an interactive command through the executor's attach
// endpoint, reached through a tunnel. The sandbox is resolved first, so a
// missing one fails as it does locally.
func (c *Client) Attach(ctx context.Context, ref string, o sbx.AttachOptions) (sbx.ExecResult, error) {
	sb, err := c.Get(ctx, ref)
	if err != nil {
		return sbx.ExecResult{}, err
	}
	ex := c.Executor(sb.ID, execclient.Options{})
	defer ex.Close()
	return ex.RunAttached(ctx, execapi.AttachRequest{ExecRequest: o.ExecRequest, Tty: o.Tty, Cols: o.Size[0], Rows: o.Size[1]},
		execclient.AttachIO{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Resize: o.Resize})
}

// CopyTo copies src on this machine into the sandbox at dst (relative to
// the sandbox's working directory), through its executor.
func (c *Client) CopyTo(ctx context.Context, ref, src, dst string) error {
	return c.withExecutor(ctx, ref, func(ex *execclient.Client, wd string) error {
		return execclient.CopyTo(ctx, ex, src, execclient.InDir(wd, dst))
	})
}

// CopyFrom copies src in the sandbox (relative to its working directory)
// to dst on this machine, through its executor.
func (c *Client) CopyFrom(ctx context.Context, ref, src, dst string) error {
	if src == "" {
		return fmt.Errorf("%w: empty sandbox path", sbx.ErrInvalid)
	}
	return c.withExecutor(ctx, ref, func(ex *execclient.Client, wd string) error {
		return execclient.CopyFrom(ctx, ex, execclient.InDir(wd, src), dst)
	})
}

// withExecutor calls fn with a client of the sandbox's executor and the
// sandbox's working directory.
func (c *Client) withExecutor(ctx context.Context, ref string, fn func(*execclient.Client, string) error) error {
	sb, err := c.Get(ctx, ref)
	if err != nil {
		return err
	}
	if sb.Status != sbx.StatusRunning {
		return fmt.Errorf("%w: sandbox %s is %s", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	wd := sb.Options.Workdir
	if wd == "" && sb.Image != nil {
		wd = sb.Image.Workdir
	}
	ex := c.Executor(sb.ID, execclient.Options{})
	defer ex.Close()
	return fn(ex, wd)
}

// Commit stores the sandbox's writable layer as a new image called name in
// the server's image cache.
func (c *Client) Commit(ctx context.Context, ref, name string) (*sbx.Image, error) {
	var img sbx.Image
	return &img, c.Call(ctx, http.MethodPost, sandboxURL(ref, "/commit"), api.CommitRequest{Name: name}, &img)
}

// GC runs the server's garbage collection.
func (c *Client) GC(ctx context.Context) (*sbx.GCReport, error) {
	var rep sbx.GCReport
	return &rep, c.Call(ctx, http.MethodPost, "/v1/gc", nil, &rep)
}

// Info returns the facts of the server's host.
func (c *Client) Info(ctx context.Context) (*sbx.HostInfo, error) {
	var info sbx.HostInfo
	return &info, c.Call(ctx, http.MethodGet, "/v1/info", nil, &info)
}
