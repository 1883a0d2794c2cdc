package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// StartMainCmd starts the sandbox's main command (its supervised main command).
func (c *Client) StartMainCmd(ctx context.Context, spec api.MainCmdSpec) (api.MainCmdStatus, error) {
	var st api.MainCmdStatus
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathMainCmd, spec, &st, maxStatusReply)
	return st, err
}

// Main command reports the sandbox's main command; an *Error with code not_found
// when none was started.
func (c *Client) MainCmd(ctx context.Context) (api.MainCmdStatus, error) {
	var st api.MainCmdStatus
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathMainCmd, nil, &st, maxStatusReply)
	return st, err
}

// WaitMainCmd waits until the main command has ended for good and returns how.
// Without a deadline on ctx it waits at most a week.
func (c *Client) WaitMainCmd(ctx context.Context) (api.MainCmdStatus, error) {
	var st api.MainCmdStatus
	err := c.call(ctx, 7*24*time.Hour, http.MethodPost, api.PathMainCmdWait, nil, &st, maxStatusReply)
	return st, err
}

// SignalMainCmd sends sig ("SIGTERM", "15") to the main command's process group.
func (c *Client) SignalMainCmd(ctx context.Context, sig string) (api.MainCmdStatus, error) {
	var st api.MainCmdStatus
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathMainCmdSignal, api.MainCmdSignal{Signal: sig}, &st, maxStatusReply)
	return st, err
}

// StopMainCmd stops the main command for good: sig (empty: SIGTERM), SIGKILL
// after grace (0: the executor's default of 10 s), no restart.
func (c *Client) StopMainCmd(ctx context.Context, sig string, grace time.Duration) (api.MainCmdStatus, error) {
	var st api.MainCmdStatus
	d := grace
	if d <= 0 {
		d = 10 * time.Second
	}
	err := c.call(ctx, d+c.opts.Grace, http.MethodPost, api.PathMainCmdStop, api.MainCmdStop{Signal: sig, TimeoutS: grace.Seconds()}, &st, maxStatusReply)
	return st, err
}

// LogOptions select the output of MainCmdLogs. Since is an absolute
// offset; TailBytes >= 0 starts that many bytes before the end instead;
// Follow keeps the stream open until the main command has ended for good.
type LogOptions struct {
	Since     int64
	TailBytes int64
	Follow    bool
}

// MainCmdLogs streams the main command's output to onFrame, one frame per
// chunk (api.LogStdout, api.LogStderr, or api.LogGap when output was
// lost), and returns the final api.LogEnd frame: where to resume, and the
// main command's status. Without Follow, or without a deadline on ctx, the
// call lasts at most TransferTimeout or a week respectively. An error
// from onFrame ends the stream.
func (c *Client) MainCmdLogs(ctx context.Context, o LogOptions, onFrame func(api.LogFrame) error) (api.LogFrame, error) {
	d := c.opts.TransferTimeout
	if o.Follow {
		d = 7 * 24 * time.Hour
	}
	ctx, cancel := withDeadline(ctx, d)
	defer cancel()
	// Without follow the reply is what the ring holds: it must keep
	// moving (IdleTimeout, as a file transfer) and be no larger than the
	// largest ring, frames' overhead included.
	touch := func() {}
	if !o.Follow {
		var stop func()
		ctx, touch, stop = c.watchIdle(ctx)
		defer stop()
	}
	var left int64 = 4*api.MaxMainCmdLogBytes + int64(c.opts.MaxFrameBytes)
	q := url.Values{}
	if o.TailBytes >= 0 {
		q.Set("tail_bytes", strconv.FormatInt(o.TailBytes, 10))
	} else {
		q.Set("since", strconv.FormatInt(o.Since, 10))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	resp, err := c.Do(ctx, http.MethodGet, api.PathMainCmdLogs+"?"+q.Encode(), nil, "", 1<<62)
	if err != nil {
		return api.LogFrame{}, idleCause(ctx, err)
	}
	defer resp.Body.Close()
	var body io.Reader = touchReader{resp.Body, touch}
	if !o.Follow {
		body = &cappedReader{r: body, left: left}
	}
	var end api.LogFrame
	err = readFrames(body, c.opts.MaxFrameBytes, "executor main command logs", func(f *api.LogFrame) (bool, error) {
		switch f.Type {
		case api.LogStdout, api.LogStderr, api.LogGap:
			return false, onFrame(*f)
		case api.LogEnd:
			if f.MainCmd == nil {
				return true, errors.New("end frame without status")
			}
			end = *f
			return true, nil
		}
		return true, fmt.Errorf("unknown frame type %q", f.Type)
	})
	if err != nil && !o.Follow {
		err = idleCause(ctx, err)
	}
	return end, err
}

// cappedReader fails with ErrReplyTooLarge once more than left bytes came.
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("executor main command logs: a reply without follow larger than the largest log ring: %w", ErrReplyTooLarge)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// MainCmdLogTail returns at most max bytes of the main command's latest output,
// stdout and stderr interleaved as written, and its status. An executor
// that sends much more than it was asked for is an error.
func (c *Client) MainCmdLogTail(ctx context.Context, max int64) (string, api.MainCmdStatus, error) {
	var b bytes.Buffer
	var got int64
	end, err := c.MainCmdLogs(ctx, LogOptions{TailBytes: max}, func(f api.LogFrame) error {
		got += int64(len(f.Data))
		if got > 2*max+int64(c.opts.MaxFrameBytes) {
			return fmt.Errorf("executor main command logs: asked for %d bytes, got more than %d: %w", max, got, ErrReplyTooLarge)
		}
		if f.Type != api.LogGap && int64(b.Len()+len(f.Data)) <= max {
			b.WriteString(f.Data)
		}
		return nil
	})
	if err != nil {
		return "", api.MainCmdStatus{}, err
	}
	return b.String(), *end.MainCmd, nil
}
