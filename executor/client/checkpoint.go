package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/executor/api"
)

// PrepareCheckpoint asks the executor to let go of the host's listening
// socket and wait on a placeholder (api.PathCheckpointPrepare), and
// returns the placeholder's abstract address. The client's kept
// connections are closed first, and the call's own connection is closed
// by the executor before this returns: none may stay open into a
// checkpoint, on the executor's side, or CRIU refuses to dump it.
func (c *Client) PrepareCheckpoint(ctx context.Context) (string, error) {
	c.Close()
	ctx, cancel := withDeadline(ctx, c.opts.Timeout)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return "", fmt.Errorf("executor checkpoint prepare: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://executor"+api.PathCheckpointPrepare, nil)
	if err != nil {
		return "", err
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return "", fmt.Errorf("executor checkpoint prepare: %w", withCtxErr(ctx, err))
	}
	br := bufio.NewReader(&cappedHeader{r: conn, left: maxHeaderBytes + maxPrepareReply})
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return "", fmt.Errorf("executor checkpoint prepare: %w", withCtxErr(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", decodeError(resp)
	}
	var out api.CheckpointPrepared
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPrepareReply)).Decode(&out); err != nil {
		return "", fmt.Errorf("executor checkpoint prepare: decode reply: %w", withCtxErr(ctx, err))
	}
	if !strings.HasPrefix(out.Listener, "@sbx-ckpt-") || len(out.Listener) > 64 {
		return "", fmt.Errorf("executor named a bad placeholder %.80q", out.Listener)
	}
	// The executor closes its end once it has answered; until it has, its
	// socket is still in the sandbox and would fail the dump.
	if _, err := io.Copy(io.Discard, io.LimitReader(br, maxPrepareReply)); err != nil {
		return "", fmt.Errorf("executor checkpoint prepare: wait for the executor to close the connection: %w", withCtxErr(ctx, err))
	}
	return out.Listener, nil
}

// maxPrepareReply caps the reply to PathCheckpointPrepare.
const maxPrepareReply = 4 << 10

// Handover gives the executor waiting on a placeholder the listening
// socket ln and its output file out (nil: none) over conn, a connection
// to the placeholder (made in the sandbox's network namespace, where the
// address lives), and waits for its answer.
func Handover(ctx context.Context, conn *net.UnixConn, ln, out *os.File) error {
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	fds := []int{int(ln.Fd())}
	if out != nil {
		fds = append(fds, int(out.Fd()))
	}
	if _, _, err := conn.WriteMsgUnix([]byte{0}, unix.UnixRights(fds...), nil); err != nil {
		return fmt.Errorf("hand the listening socket to the executor: %w", err)
	}
	line, err := bufio.NewReaderSize(conn, api.MaxHandoverLine).ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("hand the listening socket to the executor: %w", err)
	}
	if string(line) != api.HandoverOK {
		return errors.New("the executor refused the listening socket: " + strings.TrimSpace(string(line)))
	}
	return nil
}
