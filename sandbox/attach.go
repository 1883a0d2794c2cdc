package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
)

// AttachOptions describe an interactive process started in a running
// sandbox, with a terminal when Tty is set.
type AttachOptions struct {
	Args []string
	Env  []string // KEY=VALUE, added to the sandbox's environment
	Cwd  string   // default: the sandbox's working directory
	User string   // "name", "uid" or "uid:gid"; default: the sandbox's user
	Tty  bool
	// Stdin is copied to the process until EOF (nil: no input).
	Stdin          io.Reader
	Stdout, Stderr io.Writer // with Tty, all output goes to Stdout
	// Size is the initial terminal size (columns, rows); Resize carries
	// later sizes.
	Size   [2]uint16
	Resize <-chan [2]uint16
}

// Attach runs an interactive process in a running sandbox and returns its
// exit code (128+N when killed by signal N). The process is started by
// the sandbox's executor (its attach endpoint), like every other command:
// a child of the sandbox's PID 1 under its seccomp filter, capabilities,
// no_new_privs and cgroups. No host process joins the sandbox's
// namespaces to start it (the way `docker exec` does), so nothing the
// sandbox can reach runs with the host's privileges or without the
// filter. With Tty it gets a terminal of its own whose size follows
// Resize. Cancelling ctx kills the process.
func (m *Manager) Attach(ctx context.Context, ref string, o AttachOptions) (int, error) {
	if len(o.Args) == 0 {
		return 0, fmt.Errorf("%w: no command given", ErrInvalid)
	}
	req := api.AttachRequest{ExecRequest: api.ExecRequest{Argv: o.Args, Cwd: o.Cwd, User: o.User}, Tty: o.Tty, Cols: o.Size[0], Rows: o.Size[1]}
	for _, kv := range o.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return 0, fmt.Errorf("%w: environment variable %q: use KEY=VALUE", ErrInvalid, kv)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return 0, err
	}
	ex := client.NewWithDialer(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx, sb.ID) }, client.Options{})
	defer ex.Close()
	res, err := ex.RunAttached(ctx, req, client.AttachIO{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Resize: o.Resize})
	if err != nil {
		return 0, fmt.Errorf("sandbox %s: %w", sb.ShortID(), err)
	}
	return res.ExitCode, nil
}
