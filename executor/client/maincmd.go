package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

// StartService starts the sandbox's service (its supervised main command).
func (c *Client) StartService(ctx context.Context, spec api.ServiceSpec) (api.ServiceStatus, error) {
	var st api.ServiceStatus
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathService, spec, &st, maxStatusReply)
	return st, err
}

// Service reports the sandbox's service; an *Error with code not_found
// when none was started.
func (c *Client) Service(ctx context.Context) (api.ServiceStatus, error) {
	var st api.ServiceStatus
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathService, nil, &st, maxStatusReply)
	return st, err
}

// WaitService waits until the service has ended for good and returns how.
// Without a deadline on ctx it waits at most a week.
func (c *Client) WaitService(ctx context.Context) (api.ServiceStatus, error) {
	var st api.ServiceStatus
	err := c.call(ctx, 7*24*time.Hour, http.MethodPost, api.PathServiceWait, nil, &st, maxStatusReply)
	return st, err
}

// SignalService sends sig ("SIGTERM", "15") to the service's process group.
func (c *Client) SignalService(ctx context.Context, sig string) (api.ServiceStatus, error) {
	var st api.ServiceStatus
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathServiceSignal, api.ServiceSignal{Signal: sig}, &st, maxStatusReply)
	return st, err
}

// StopService stops the service for good: sig (empty: SIGTERM), SIGKILL
// after grace (0: the executor's default of 10 s), no restart.
func (c *Client) StopService(ctx context.Context, sig string, grace time.Duration) (api.ServiceStatus, error) {
	var st api.ServiceStatus
	d := grace
	if d <= 0 {
		d = 10 * time.Second
	}
	err := c.call(ctx, d+c.opts.Grace, http.MethodPost, api.PathServiceStop, api.ServiceStop{Signal: sig, TimeoutS: grace.Seconds()}, &st, maxStatusReply)
	return st, err
}

// LogOptions select the output of ServiceLogs. Since is an absolute
// offset; TailBytes >= 0 starts that many bytes before the end instead;
// Follow keeps the stream open until the service has ended for good.
type LogOptions struct {
	Since     int64
	TailBytes int64
	Follow    bool
}

// ServiceLogs streams the service's output to onFrame, one frame per
// chunk (api.LogStdout, api.LogStderr, or api.LogGap when output was
// lost), and returns the final api.LogEnd frame: where to resume, and the
// service's status. Without Follow, or without a deadline on ctx, the
// call lasts at most TransferTimeout or a week respectively. An error
// from onFrame ends the stream.
func (c *Client) ServiceLogs(ctx context.Context, o LogOptions, onFrame func(api.LogFrame) error) (api.LogFrame, error) {
	d := c.opts.TransferTimeout
	if o.Follow {
		d = 7 * 24 * time.Hour
	}
	ctx, cancel := withDeadline(ctx, d)
	defer cancel()
	q := url.Values{}
	if o.TailBytes >= 0 {
		q.Set("tail_bytes", strconv.FormatInt(o.TailBytes, 10))
	} else {
		q.Set("since", strconv.FormatInt(o.Since, 10))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	resp, err := c.Do(ctx, http.MethodGet, api.PathServiceLogs+"?"+q.Encode(), nil, "", 1<<62)
	if err != nil {
		return api.LogFrame{}, err
	}
	defer resp.Body.Close()
	var end api.LogFrame
	err = readFrames(resp.Body, c.opts.MaxFrameBytes, "executor service logs", func(f *api.LogFrame) (bool, error) {
		switch f.Type {
		case api.LogStdout, api.LogStderr, api.LogGap:
			return false, onFrame(*f)
		case api.LogEnd:
			if f.Service == nil {
				return true, errors.New("end frame without status")
			}
			end = *f
			return true, nil
		}
		return true, fmt.Errorf("unknown frame type %q", f.Type)
	})
	return end, err
}

// ServiceLogTail returns at most max bytes of the service's latest output,
// stdout and stderr interleaved as written, and its status. An executor
// that sends much more than it was asked for is an error.
func (c *Client) ServiceLogTail(ctx context.Context, max int64) (string, api.ServiceStatus, error) {
	var b bytes.Buffer
	var got int64
	end, err := c.ServiceLogs(ctx, LogOptions{TailBytes: max}, func(f api.LogFrame) error {
		got += int64(len(f.Data))
		if got > 2*max+int64(c.opts.MaxFrameBytes) {
			return fmt.Errorf("executor service logs: asked for %d bytes, got more than %d: %w", max, got, ErrReplyTooLarge)
		}
		if f.Type != api.LogGap && int64(b.Len()+len(f.Data)) <= max {
			b.WriteString(f.Data)
		}
		return nil
	})
	if err != nil {
		return "", api.ServiceStatus{}, err
	}
	return b.String(), *end.Service, nil
}
