package sandbox

import (
	"context"
	"fmt"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
)

// Executor returns a client for the executor of a running sandbox, and the
// sandbox's record. The caller closes the client. The executor is
// untrusted; the client caps every reply and puts a deadline on every call.
func (m *Manager) Executor(ctx context.Context, ref string) (*client.Client, *Sandbox, error) {
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	switch sb.Status {
	case StatusRunning:
	case StatusPaused:
		return nil, nil, fmt.Errorf("%w: sandbox %s is paused: resume it first", ErrState, sb.ShortID())
	case StatusStopped:
		return nil, nil, stoppedError(sb)
	default:
		return nil, nil, fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.ShortID(), sb.Status)
	}
	return client.New(sb.Socket, client.Options{}), sb, nil
}

// Exec runs a command in a running sandbox through its executor. With
// onOutput, output is streamed to it as it is produced; the result comes
// last either way.
func (m *Manager) Exec(ctx context.Context, ref string, req api.ExecRequest, onOutput func(api.ExecFrame) error) (api.ExecResult, error) {
	c, _, err := m.Executor(ctx, ref)
	if err != nil {
		return api.ExecResult{}, err
	}
	defer c.Close()
	if onOutput == nil {
		return c.Exec(ctx, req)
	}
	return c.ExecStream(ctx, req, onOutput)
}
