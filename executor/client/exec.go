package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/internal/termsafe"
)

// execBudget is the call deadline and reply cap of an exec request.
func (c *Client) execBudget(req api.ExecRequest) (time.Duration, int64) {
	d := c.opts.TransferTimeout
	if req.Timeout > 0 {
		// The command's stop at the timeout takes up to its grace.
		grace := req.StopGrace
		if grace <= 0 {
			grace = sbx.DefaultExecStopGrace
		}
		d = min(req.Timeout, week) + grace + c.opts.Grace
	}
	out := int64(req.MaxOutputBytes)
	if out <= 0 {
		out = 1 << 20
	}
	out = min(out, 8<<20)
	// Two streams, JSON escaping (up to 6 bytes per byte), the marker.
	return d, 2*6*out + 64<<10
}

// Exec runs one command to its end; with req.Detach it starts the command
// and returns at once (see execDetached).
func (c *Client) Exec(ctx context.Context, req api.ExecRequest) (api.ExecResult, error) {
	if req.Detach {
		return c.execDetached(ctx, req)
	}
	d, maxBytes := c.execBudget(req)
	var res api.ExecResult
	err := c.call(ctx, d, http.MethodPost, api.PathExec, req, &res, maxBytes)
	return checked(res), err
}

// execDetached starts a detached command (docker exec -d). The reply is
// small and held to what a detached start can say: a pid the kernel could
// hand out, or a failed start's exit code (126, 127) with a short reason;
// no output, nothing else.
func (c *Client) execDetached(ctx context.Context, req api.ExecRequest) (api.ExecResult, error) {
	var res api.ExecResult
	if err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathExec, req, &res, 64<<10); err != nil {
		return api.ExecResult{}, err
	}
	switch {
	case res.Stdout != "" || res.TimedOut || res.Truncated:
		return api.ExecResult{}, errors.New("executor: the reply to a detached exec carries output")
	case res.Pid == 0 && res.ExitCode != 126 && res.ExitCode != 127:
		return api.ExecResult{}, fmt.Errorf("executor: the reply to a detached exec has no pid (exit code %d)", res.ExitCode)
	case res.Pid < 0 || res.Pid > maxPid || (res.Pid > 0 && (res.ExitCode != 0 || res.Stderr != "")):
		return api.ExecResult{}, fmt.Errorf("executor: the reply to a detached exec has pid %d, exit code %d", res.Pid, res.ExitCode)
	}
	// The reason is one sanitised line, its newline kept out of the
	// sanitiser (which would show it as '?').
	reason := termsafe.String(strings.TrimRight(res.Stderr, "\n"), 4095)
	if reason != "" {
		reason += "\n"
	}
	return api.ExecResult{Pid: res.Pid, ExitCode: res.ExitCode, Stderr: reason}, nil
}

// checked keeps a result the executor sent within what a process can
// report: an exit code of 0 to 255 (255 for anything else), a short
// signal name, so that callers can pass them on as they are.
func checked(res api.ExecResult) api.ExecResult {
	if res.ExitCode < 0 || res.ExitCode > 255 {
		res.ExitCode = 255
	}
	if len(res.Signal) > 16 {
		res.Signal = res.Signal[:16]
	}
	res.Signal = termsafe.String(res.Signal, 16)
	return res
}

// ExecStream runs one command and calls onOutput with each stdout or stderr
// frame as it is produced; it returns the final result. An error from
// onOutput ends the call (and the executor kills the command).
func (c *Client) ExecStream(ctx context.Context, req api.ExecRequest, onOutput func(api.ExecFrame) error) (api.ExecResult, error) {
	if req.Detach {
		return c.execDetached(ctx, req) // nothing to stream
	}
	d, _ := c.execBudget(req)
	ctx, cancel := withDeadline(ctx, d)
	defer cancel()
	data, err := json.Marshal(req)
	if err != nil {
		return api.ExecResult{}, fmt.Errorf("encode request: %w", err)
	}
	resp, err := c.Do(ctx, http.MethodPost, api.PathExec+"?stream=1", bytes.NewReader(data), "application/json", 1<<62)
	if err != nil {
		return api.ExecResult{}, err
	}
	defer resp.Body.Close()
	var res api.ExecResult
	err = readFrames(resp.Body, c.opts.MaxFrameBytes, "executor exec stream", func(f *api.ExecFrame) (bool, error) {
		switch f.Type {
		case api.FrameStdout, api.FrameStderr:
			return false, onOutput(*f)
		case api.FrameResult:
			if f.Result == nil {
				return true, errors.New("result frame without result")
			}
			res = checked(*f.Result)
			return true, nil
		case api.FrameError:
			if f.Error == nil {
				return true, errors.New("error frame without error")
			}
			return true, newError(http.StatusOK, f.Error.Code, f.Error.Message, nil)
		}
		return true, fmt.Errorf("unknown frame type %q", f.Type)
	})
	return res, err
}

// readFrames decodes the NDJSON frames of body, each at most max bytes,
// into F and hands them to handle until it reports done or fails. An
// error handle returns with done unset is returned as it is (the caller's
// callback failed); errors of the stream and of its last frame are
// prefixed with what. A stream that ends before handle is done is an
// error.
func readFrames[F any](body io.Reader, max int, what string, handle func(*F) (done bool, err error)) error {
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := readLine(br, max)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		var f F
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("%s: bad frame: %w", what, err)
		}
		done, err := handle(&f)
		switch {
		case err != nil && !done:
			return err // the caller's own error, as it gave it
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case done:
			return nil
		}
	}
}

// readLine reads one "\n"-terminated line of at most max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, fmt.Errorf("frame longer than %d bytes: %w", max, ErrReplyTooLarge)
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil, err
		}
		return line, nil
	}
}
