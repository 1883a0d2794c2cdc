package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// Attachment is an interactive command started by Attach: write its
// input, resize its terminal, and Wait for its output and result. It
// ends when the command exits; Close kills the command.
type Attachment struct {
	conn net.Conn
	br   *bufio.Reader
	mu   sync.Mutex
	stop func() bool
}

// Attach starts an interactive command (POST /v1/exec/attach) on a
// connection of its own. ctx bounds the whole attachment: when it ends
// the connection closes and the executor kills the command.
func (c *Client) Attach(ctx context.Context, req api.AttachRequest) (*Attachment, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	conn, err := c.dial(dctx)
	if err != nil {
		return nil, fmt.Errorf("connect to the executor: %w", err)
	}
	if d, ok := dctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	hr, err := http.NewRequest(http.MethodPost, "http://executor"+api.PathExecAttach, bytes.NewReader(body))
	if err != nil {
		conn.Close()
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Connection", "Upgrade")
	hr.Header.Set("Upgrade", api.UpgradeAttach)
	if err := hr.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("executor attach: %w", err)
	}
	capped := &cappedHeader{r: conn, left: 64 << 10}
	br := bufio.NewReaderSize(capped, 32<<10)
	resp, err := http.ReadResponse(br, hr)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("executor attach: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		defer resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return nil, fmt.Errorf("executor attach: unexpected status %d (an executor too old for attach?)", resp.StatusCode)
		}
		return nil, decodeError(resp)
	}
	_ = conn.SetDeadline(time.Time{})
	capped.off = true // the header cap no longer applies; frames are capped one by one
	a := &Attachment{conn: conn, br: br}
	a.stop = context.AfterFunc(ctx, func() { conn.Close() })
	return a, nil
}

// cappedHeader fails reads past its cap, so that an executor cannot send
// an endless reply header.
type cappedHeader struct {
	r    io.Reader
	left int64
	off  bool
}

func (c *cappedHeader) Read(p []byte) (int, error) {
	if c.off {
		return c.r.Read(p)
	}
	if c.left <= 0 {
		return 0, ErrReplyTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// Write sends input to the command.
func (a *Attachment) Write(p []byte) (int, error) {
	for sent := 0; sent < len(p); {
		n := min(len(p)-sent, 32<<10)
		if err := a.send(api.AttachStdin, p[sent:sent+n]); err != nil {
			return sent, err
		}
		sent += n
	}
	return len(p), nil
}

// CloseStdin closes the command's input (without a terminal).
func (a *Attachment) CloseStdin() error { return a.send(api.AttachStdin, nil) }

// Resize changes the size of the command's terminal.
func (a *Attachment) Resize(cols, rows uint16) error {
	return a.send(api.AttachResize, api.ResizePayload(cols, rows))
}

func (a *Attachment) send(typ byte, payload []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return api.WriteAttachFrame(a.conn, typ, payload)
}

// Wait copies the command's output to stdout and stderr until it exits
// and returns its result. An executor that breaks the protocol or closes
// the connection early gives an error.
func (a *Attachment) Wait(stdout, stderr io.Writer) (api.ExecResult, error) {
	for {
		typ, payload, err := api.ReadAttachFrame(a.br, api.MaxAttachFrame)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				err = io.ErrUnexpectedEOF
			}
			return api.ExecResult{}, fmt.Errorf("executor attach: the connection ended before the command's result: %w", err)
		}
		switch typ {
		case api.AttachStdout:
			if _, err := stdout.Write(payload); err != nil {
				return api.ExecResult{}, err
			}
		case api.AttachStderr:
			if _, err := stderr.Write(payload); err != nil {
				return api.ExecResult{}, err
			}
		case api.AttachExit:
			var res api.ExecResult
			if err := json.Unmarshal(payload, &res); err != nil {
				return res, fmt.Errorf("executor attach: bad exit frame: %w", err)
			}
			return checked(res), nil
		case api.AttachError:
			var e api.ErrorBody
			if err := json.Unmarshal(payload, &e); err != nil || e.Code == "" {
				return api.ExecResult{}, fmt.Errorf("executor attach: bad error frame %.200q", payload)
			}
			return api.ExecResult{}, newError(http.StatusInternalServerError, e.Code, e.Message, nil)
		default:
			return api.ExecResult{}, fmt.Errorf("executor attach: unknown frame type %q", typ)
		}
	}
}

// Close ends the attachment; a command still running is killed.
func (a *Attachment) Close() error {
	a.stop()
	return a.conn.Close()
}

// AttachIO connects an attached command to the caller: Stdin is copied to
// it (nil: no input; without a terminal its end closes the command's
// stdin), its output goes to Stdout and Stderr (with a terminal all of it
// goes to Stdout), and every size sent on Resize (columns, rows) resizes
// its terminal.
type AttachIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Resize         <-chan [2]uint16
}

// RunAttached runs req attached through the executor and returns its
// result once it exits, or an error when ctx ends (the command is then
// killed) or the executor breaks the protocol.
func (c *Client) RunAttached(ctx context.Context, req api.AttachRequest, stdio AttachIO) (api.ExecResult, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, err := c.Attach(actx, req)
	if err != nil {
		return api.ExecResult{}, err
	}
	defer a.Close()
	if stdio.Resize != nil {
		go func() {
			for {
				select {
				case <-actx.Done():
					return
				case s, ok := <-stdio.Resize:
					if !ok {
						return
					}
					_ = a.Resize(s[0], s[1])
				}
			}
		}()
	}
	if stdio.Stdin != nil {
		go func() {
			_, err := io.Copy(a, stdio.Stdin)
			if err == nil && !req.Tty {
				_ = a.CloseStdin()
			}
		}()
	} else if !req.Tty {
		_ = a.CloseStdin()
	}
	stdout, stderr := stdio.Stdout, stdio.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	res, err := a.Wait(stdout, stderr)
	if err != nil && ctx.Err() != nil {
		return res, fmt.Errorf("attach: %w", ctx.Err())
	}
	return res, err
}
