package sandbox

import (
	"context"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/client"
)

// executor returns a client for the executor of a running sandbox; the
// caller closes it. The executor is untrusted: the client caps every reply
// and puts a deadline on every call.
func (h *Host) executor(sb *sbx.Sandbox) (*client.Client, error) {
	return client.New(sb.Socket, client.Options{}), nil
}

// Exec runs a command in a running sandbox through its executor. With
// onOutput, output is streamed to it as it is produced; the result comes
// last either way.
func (h *Host) Exec(ctx context.Context, ref string, req sbx.ExecRequest, onOutput func(sbx.ExecFrame) error) (sbx.ExecResult, error) {
	sb, err := h.running(ctx, ref)
	if err != nil {
		return sbx.ExecResult{}, err
	}
	c, _ := h.executor(sb)
	defer c.Close()
	if onOutput == nil {
		return c.Exec(ctx, req)
	}
	return c.ExecStream(ctx, req, onOutput)
}
