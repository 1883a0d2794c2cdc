// Package client talks to an sbx executor over its unix socket. It is used
// by the sandbox Manager, the CLI and the REST server's proxy.
//
// The executor runs inside the sandbox and is untrusted: every call has a
// deadline (the context's, or a default when it has none) and every reply
// is read under a size cap, so a hostile or stuck executor can neither hang
// nor exhaust the host.
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
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/internal/termsafe"
)

// Options tune a Client. Zero values take the defaults in brackets.
type Options struct {
	// Timeout is the deadline of calls whose context has none and whose
	// duration the request does not say [30 s].
	Timeout time.Duration
	// TransferTimeout is the deadline of file and archive transfers and of
	// commands without timeout_s, when the context has none [10 min].
	TransferTimeout time.Duration
	// Grace is added to a request's own timeout (timeout_s) to get the
	// call's deadline [10 s].
	Grace time.Duration
	// MaxReplyBytes caps a JSON reply [64 MiB]; exec replies are capped by
	// what max_output_bytes allows.
	MaxReplyBytes int64
	// MaxFrameBytes caps one line of a streamed exec [1 MiB].
	MaxFrameBytes int
	// IdleTimeout ends a file or archive transfer during which the
	// executor neither sends nor takes a byte for this long [30 s]: a
	// stalled or hostile executor cannot hold sbx cp for the whole
	// TransferTimeout.
	IdleTimeout time.Duration
}

// Client calls one executor. It is safe for concurrent use and keeps
// connections open between calls.
type Client struct {
	dial func(ctx context.Context) (net.Conn, error)
	hc   *http.Client
	tr   *http.Transport
	pool connPool // kept-alive connections of JSON calls
	opts Options
}

// New returns a client for the executor listening on socketPath.
func New(socketPath string, opts Options) *Client {
	var d net.Dialer
	return NewWithDialer(func(ctx context.Context) (net.Conn, error) {
		return d.DialContext(ctx, "unix", socketPath)
	}, opts)
}

// NewWithDialer returns a client that reaches the executor through dial
// (for sockets whose path is too long for a sockaddr, or that live in
// another mount namespace).
func NewWithDialer(dial func(ctx context.Context) (net.Conn, error), opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.TransferTimeout <= 0 {
		opts.TransferTimeout = 10 * time.Minute
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = 64 << 20
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = 1 << 20
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 30 * time.Second
	}
	tr := &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Client{dial: dial, hc: &http.Client{Transport: tr}, tr: tr, opts: opts}
}

// Close drops idle connections.
func (c *Client) Close() {
	c.tr.CloseIdleConnections()
	c.pool.close()
}

// Error is an error reply of the executor.
type Error struct {
	Status  int
	Code    string
	Message string
	Lines   []int
}

func (e *Error) Error() string {
	if e.Status/100 == 2 { // an error frame inside a streamed reply
		return fmt.Sprintf("executor: %s (%s)", e.Message, e.Code)
	}
	return fmt.Sprintf("executor: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// IsCode reports whether err is an executor error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// ErrReplyTooLarge reports a reply over its size cap.
var ErrReplyTooLarge = errors.New("executor reply exceeds its size cap")

// withDeadline adds d to ctx unless it already has a deadline.
func withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// seconds converts a request's timeout, capped at a week (the executor's
// own cap) so huge values cannot overflow.
func seconds(s float64) time.Duration {
	const week = 7 * 24 * time.Hour
	if s*float64(time.Second) >= float64(week) {
		return week
	}
	return time.Duration(s * float64(time.Second))
}

// Do sends one request and returns the reply with its body capped at
// maxBytes (reading past it fails with ErrReplyTooLarge). Non-2xx replies
// come back as *Error. The caller closes the body. The REST proxy uses it.
func (c *Client) Do(ctx context.Context, method, pathQuery string, body io.Reader, contentType string, maxBytes int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://executor"+pathQuery, body)
	if err != nil {
		return nil, fmt.Errorf("executor request: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("executor %s %s: %w", method, pathQuery, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxBytes}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e api.Error
	if err := json.Unmarshal(data, &e); err != nil || e.Error.Code == "" {
		return &Error{Status: resp.StatusCode, Code: api.CodeInternal, Message: fmt.Sprintf("unexpected reply: %.200q", data)}
	}
	return newError(resp.StatusCode, e.Error.Code, e.Error.Message, e.Error.Lines)
}

// newError is an executor error whose strings, which the sandbox chose,
// are made safe to print: no escape sequences, bounded length.
func newError(status int, code, message string, lines []int) *Error {
	if len(lines) > 64 {
		lines = lines[:64]
	}
	return &Error{Status: status, Code: termsafe.String(code, 64), Message: termsafe.String(message, 4096), Lines: lines}
}

// cappedBody fails reads past its cap instead of truncating silently.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Allow a clean EOF exactly at the cap.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, ErrReplyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// call sends a JSON request (nil for none) and decodes a JSON reply into out.
// It runs on a kept-alive connection of its own (see roundTrip).
func (c *Client) call(ctx context.Context, timeout time.Duration, method, pathQuery string, in, out any, maxBytes int64) error {
	ctx, cancel := withDeadline(ctx, timeout)
	defer cancel()
	var data []byte
	ct := ""
	if in != nil {
		var err error
		if data, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		ct = "application/json"
	}
	resp, err := c.roundTrip(ctx, method, pathQuery, data, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	body := &cappedBody{rc: resp.Body, left: maxBytes}
	if out != nil {
		if err := json.NewDecoder(body).Decode(out); err != nil {
			return fmt.Errorf("executor %s %s: decode reply: %w", method, pathQuery, withCtxErr(ctx, err))
		}
	}
	// The rest (a newline) is read so that the connection is kept.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("executor %s %s: %w", method, pathQuery, withCtxErr(ctx, err))
	}
	return nil
}

// Health checks that the executor answers.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathHealth, nil, &h, 64<<10)
	return h, err
}

// Info reports resource use inside the sandbox.
func (c *Client) Info(ctx context.Context) (api.Info, error) {
	var i api.Info
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathInfo, nil, &i, 64<<10)
	return i, err
}

// SetDefaults replaces the default environment and working directory of
// later commands (creating the directory), as the host does when it hands
// a warm pool's member to a create.
func (c *Client) SetDefaults(ctx context.Context, d api.Defaults) error {
	return c.call(ctx, c.opts.Timeout, http.MethodPut, api.PathDefaults, d, nil, 64<<10)
}

// execBudget is the call deadline and reply cap of an exec request.
func (c *Client) execBudget(req api.ExecRequest) (time.Duration, int64) {
	d := c.opts.TransferTimeout
	if req.TimeoutS > 0 {
		d = seconds(req.TimeoutS) + c.opts.Grace
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

// maxPid bounds a pid the executor reports: the kernel's PID_MAX_LIMIT.
const maxPid = 1 << 22

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

// CreateSession starts a shell session.
func (c *Client) CreateSession(ctx context.Context, req api.SessionRequest) (api.Session, error) {
	var s api.Session
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathSessions, req, &s, 64<<10)
	return s, err
}

// ListSessions lists the open sessions.
func (c *Client) ListSessions(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathSessions, nil, &l, 4<<20)
	return l.Sessions, err
}

// DeleteSession kills a session's shell and everything it started.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.call(ctx, c.opts.Timeout, http.MethodDelete, api.PathSessions+"/"+url.PathEscape(id), nil, nil, 64<<10)
}

// Run runs a command in a session, continues it (Command "") or sends it
// input (IsInput). The call lasts at most the request's timeout_s (default
// 120 s) plus the grace.
func (c *Client) Run(ctx context.Context, id string, req api.RunRequest) (api.RunResult, error) {
	d := 120 * time.Second
	if req.TimeoutS > 0 {
		d = seconds(req.TimeoutS)
	}
	out := int64(req.MaxOutputBytes)
	if out <= 0 {
		out = 64 << 10
	}
	out = min(out, 8<<20)
	var res api.RunResult
	err := c.call(ctx, d+c.opts.Grace, http.MethodPost, api.PathSessions+"/"+url.PathEscape(id)+"/run", req, &res, 6*out+64<<10)
	return res, err
}

// ReadFile copies the file at path into w, failing with ErrReplyTooLarge
// past max bytes.
func (c *Client) ReadFile(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	return c.download(ctx, api.PathFiles+"?path="+url.QueryEscape(path), w, max)
}

// ReadLines returns lines start..end (1-based, inclusive; end -1 for the
// last) of a text file.
func (c *Client) ReadLines(ctx context.Context, path string, start, end int, max int64) ([]byte, error) {
	var b bytes.Buffer
	q := url.Values{"path": {path}, "start_line": {strconv.Itoa(start)}, "end_line": {strconv.Itoa(end)}}
	_, err := c.download(ctx, api.PathFiles+"?"+q.Encode(), &b, max)
	return b.Bytes(), err
}

// GetArchive writes a tar of the file or directory at path into w, failing
// with ErrReplyTooLarge past max bytes.
func (c *Client) GetArchive(ctx context.Context, path string, w io.Writer, max int64) (int64, error) {
	return c.download(ctx, api.PathFsArchive+"?path="+url.QueryEscape(path), w, max)
}

func (c *Client) download(ctx context.Context, pathQuery string, w io.Writer, max int64) (int64, error) {
	ctx, cancel := withDeadline(ctx, c.opts.TransferTimeout)
	defer cancel()
	ctx, touch, stop := c.watchIdle(ctx)
	defer stop()
	resp, err := c.Do(ctx, http.MethodGet, pathQuery, nil, "", max)
	if err != nil {
		return 0, idleCause(ctx, err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, touchReader{resp.Body, touch})
	if err != nil {
		return n, fmt.Errorf("executor GET %s: %w", pathQuery, idleCause(ctx, err))
	}
	return n, nil
}

// errIdle is the cause of a transfer ended by Options.IdleTimeout.
var errIdle = errors.New("the executor stalled: no data moved")

// watchIdle returns ctx cancelled once touch has not been called for
// IdleTimeout, and a function that stops watching.
func (c *Client) watchIdle(ctx context.Context) (context.Context, func(), func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	d := c.opts.IdleTimeout
	t := time.AfterFunc(d, func() { cancel(fmt.Errorf("%w for %v", errIdle, d)) })
	return ctx, func() { t.Reset(d) }, func() { t.Stop(); cancel(nil) }
}

// idleCause replaces err with the idle timeout when that ended ctx.
func idleCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
		return cause
	}
	return err
}

// touchReader calls touch whenever bytes move through it.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t touchReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// WriteFile replaces the file at path with the content of r, atomically.
// mode 0 keeps an existing file's mode (0644 for a new file).
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader, mode os.FileMode) (api.WriteResult, error) {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode.Perm()), 8))
	}
	var res api.WriteResult
	err := c.upload(ctx, api.PathFiles+"?"+q.Encode(), r, "application/octet-stream", &res)
	return res, err
}

// PutArchive extracts the tar stream r into the directory dir.
func (c *Client) PutArchive(ctx context.Context, dir string, r io.Reader) (api.ArchiveResult, error) {
	var res api.ArchiveResult
	err := c.upload(ctx, api.PathFsArchive+"?path="+url.QueryEscape(dir), r, "application/x-tar", &res)
	return res, err
}

func (c *Client) upload(ctx context.Context, pathQuery string, r io.Reader, ct string, out any) error {
	ctx, cancel := withDeadline(ctx, c.opts.TransferTimeout)
	defer cancel()
	ctx, touch, stop := c.watchIdle(ctx)
	defer stop()
	resp, err := c.Do(ctx, http.MethodPut, pathQuery, touchReader{r, touch}, ct, 64<<10)
	if err != nil {
		return idleCause(ctx, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("executor PUT %s: decode reply: %w", pathQuery, err)
	}
	return nil
}

// Edit runs one editor command (view, create, str_replace, insert,
// undo_edit).
func (c *Client) Edit(ctx context.Context, req api.EditRequest) (api.EditResult, error) {
	var res api.EditResult
	err := c.call(ctx, c.opts.Timeout, http.MethodPost, api.PathFilesEdit, req, &res, 16<<20)
	return res, err
}

// List lists a directory.
func (c *Client) List(ctx context.Context, path string) (api.Listing, error) {
	var l api.Listing
	err := c.call(ctx, c.opts.Timeout, http.MethodGet, api.PathFsList+"?path="+url.QueryEscape(path), nil, &l, c.opts.MaxReplyBytes)
	return l, err
}

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

// maxStatusReply caps a service status (argv and recent exits).
const maxStatusReply = 1 << 20

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
