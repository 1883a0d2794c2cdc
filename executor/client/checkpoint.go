package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
// connections are closed: none may stay open into a checkpoint.
func (c *Client) PrepareCheckpoint(ctx context.Context) (string, error) {
	var out api.CheckpointPrepared
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathCheckpointPrepare, nil, &out, 4<<10)
	c.Close()
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(out.Listener, "@sbx-ckpt-") || len(out.Listener) > 64 {
		return "", fmt.Errorf("executor named a bad placeholder %.80q", out.Listener)
	}
	return out.Listener, nil
}

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
