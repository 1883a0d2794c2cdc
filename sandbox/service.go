package sandbox

import (
	"context"
	"fmt"
	"net"

	"github.com/sbxrun/sbx"
)

// The main command's operations (Options.Cmd run as the executor's
// supervised service) and DialPort are built in issue 13; until they land
// they say so.

// Logs returns the output of the sandbox's main command.
func (h *Host) Logs(ctx context.Context, ref string, o sbx.LogOptions, fn func(sbx.LogFrame) error) error {
	return notYet("logs")
}

// Wait waits until the sandbox's main command has ended for good.
func (h *Host) Wait(ctx context.Context, ref string) (*sbx.Exit, error) {
	return nil, notYet("wait")
}

// Signal sends a signal to the sandbox's main command.
func (h *Host) Signal(ctx context.Context, ref, signal string) error {
	return notYet("signal")
}

// DialPort connects to a TCP port inside the sandbox's network.
func (h *Host) DialPort(ctx context.Context, ref string, port int) (net.Conn, error) {
	return nil, notYet("port dialing")
}

func notYet(what string) error {
	return fmt.Errorf("%w: %s of a sandbox's main command is not built yet (issue 13)", sbx.ErrUnsupported, what)
}
