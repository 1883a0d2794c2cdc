package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/netns"
)

// DialPort connects to TCP port on the loopback of a running sandbox, from
// inside its network namespace, as a port-forward does: the sandbox needs
// no published port and no bridge, and a service bound to 127.0.0.1 in it
// is reachable. A paused sandbox accepts the connection (the kernel does)
// but answers nothing until resumed.
func (h *Host) DialPort(ctx context.Context, ref string, port int) (net.Conn, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d is out of range (1-65535)", sbx.ErrInvalid, port)
	}
	sb, err := h.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if sb.Options.IdleTimeout > 0 {
		// Port traffic is use: it wakes a sandbox checkpointed for
		// idleness, and keeps it awake.
		var done func()
		if sb, done, err = h.use(ctx, sb.ID); err != nil {
			return nil, err
		}
		defer done()
		c, err := h.dialSandboxPort(ctx, sb, port)
		if err != nil {
			return nil, err
		}
		return newActivityConn(c, h.store.RunDir(sb.ID)), nil
	}
	if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
		return nil, fmt.Errorf("%w: sandbox %s is %s: start it first", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	return h.dialSandboxPort(ctx, sb, port)
}

// dialSandboxPort is DialPort to sb whatever its status says (a pool
// member booting its main command).
func (h *Host) dialSandboxPort(ctx context.Context, sb *sbx.Sandbox, port int) (net.Conn, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if sb.Network != nil && sb.Network.Mode == sbx.NetworkHost {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	if sb.Network != nil && sb.Network.NetNSPath != "" {
		return netns.Dial(ctx, sb.Network.NetNSPath, "tcp", addr)
	}
	// A namespace of its own (network none): PID 1's. The start time,
	// checked after the namespace is open, rules out a reused PID.
	f, err := os.Open("/proc/" + strconv.Itoa(sb.Pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("%w: sandbox %s: open its network namespace: %v", sbx.ErrState, sb.ShortID(), err)
	}
	defer f.Close()
	if start, ok := procStart(sb.Pid); !ok || start != sb.PidStart {
		return nil, fmt.Errorf("%w: sandbox %s is no longer running", sbx.ErrState, sb.ShortID())
	}
	return netns.DialFD(ctx, int(f.Fd()), "tcp", addr)
}

// Dial connects to the executor of a running sandbox; one checkpointed
// by its idle timeout is restored first, and the connection's traffic
// counts as its use.
func (h *Host) Dial(ctx context.Context, ref string) (net.Conn, error) {
	sb, done, err := h.use(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sb.Socket)
	if err != nil {
		return nil, fmt.Errorf("connect to the executor of %s: %w", ref, err)
	}
	if sb.Options.IdleTimeout > 0 {
		return newActivityConn(c, h.store.RunDir(sb.ID)), nil
	}
	return c, nil
}
