package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// JSON calls (exec, session commands, health, ...) are one small request
// and one reply read whole. They go over a kept-alive connection written
// and read by the calling goroutine itself: http.Transport's reader and
// writer goroutines cost each call several thread hand-offs (futex wakes),
// measured at a quarter of a millisecond per exec round trip on a 2-CPU
// VM. Streams, transfers and upgrades keep using http.Transport.

const (
	// maxIdleConns bounds the connections kept open between calls.
	maxIdleConns = 16
	// maxIdleAge drops connections idle this long instead of reusing them:
	// far below the executor's idle timeout (5 min), so the executor never
	// closes one as it is being reused.
	maxIdleAge = 60 * time.Second
	// maxHeaderBytes caps the status line and headers of a reply, as
	// http.Transport's MaxResponseHeaderBytes does for the other calls.
	maxHeaderBytes = 64 << 10
)

// syncConn is one kept-alive connection to the executor.
type syncConn struct {
	conn  net.Conn
	lim   *cappedHeader
	br    *bufio.Reader
	idle  time.Time // when it went back to the pool
	reqBf bytes.Buffer
}

// connPool holds idle connections, most recently used last.
type connPool struct {
	mu     sync.Mutex
	idle   []*syncConn
	closed bool
}

// get returns an idle connection, or nil. One with unread bytes (a reply
// nobody asked for) or that the executor closed is dropped; one it closes
// as the request goes out fails the write, and the request is sent again on
// a new connection (see roundTrip).
func (p *connPool) get() *syncConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		sc := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(sc.idle) < maxIdleAge && sc.br.Buffered() == 0 && sc.quiet() {
			return sc
		}
		sc.conn.Close()
	}
	return nil
}

// quiet reports whether the executor has sent nothing on an idle
// connection and not closed it: a non-blocking peek finds nothing to read.
func (sc *syncConn) quiet() bool {
	sysc, ok := sc.conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sysc.SyscallConn()
	if err != nil {
		return false
	}
	quiet := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		quiet = rerr == unix.EAGAIN
		return true // never wait
	})
	return err == nil && quiet
}

// put keeps sc for a later call, or closes it.
func (p *connPool) put(sc *syncConn) {
	sc.idle = time.Now()
	p.mu.Lock()
	if !p.closed && len(p.idle) < maxIdleConns {
		p.idle = append(p.idle, sc)
		sc = nil
	}
	p.mu.Unlock()
	if sc != nil {
		sc.conn.Close()
	}
}

// close closes the idle connections; later ones are closed as they return.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, sc := range idle {
		sc.conn.Close()
	}
}

// roundTrip sends one request with a small body held in memory and returns
// the reply, whose body the caller reads to its end (or not) and closes.
// It is called by the goroutine that waits for the reply; ctx bounds it.
func (c *Client) roundTrip(ctx context.Context, method, pathQuery string, body []byte, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://executor"+pathQuery, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("executor request: %w", err)
	}
	if body == nil {
		req.Body, req.GetBody, req.ContentLength = nil, nil, 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 && req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil { // the first write read it
				return nil, fmt.Errorf("executor request: %w", err)
			}
		}
		sc, reused, err := c.conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("executor %s %s: %w", method, pathQuery, err)
		}
		resp, written, err := c.exchange(ctx, sc, req)
		if err == nil {
			return resp, nil
		}
		sc.conn.Close()
		// A kept-alive connection the executor closed as the request went
		// out: the request is sent again, once, on a new connection when
		// nothing of it reached the executor, or when it asks for nothing
		// to be done (GET, HEAD) and the executor closed without a word,
		// as http.Transport does.
		retry := !written || (method == http.MethodGet || method == http.MethodHead) && closedEarly(err)
		if reused && retry && attempt == 0 && ctx.Err() == nil {
			continue
		}
		return nil, fmt.Errorf("executor %s %s: %w", method, pathQuery, withCtxErr(ctx, err))
	}
}

// withCtxErr is err, or the context's error (with err said) when the
// context ended the call: the connection's deadline fired for it.
func withCtxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// conn returns an idle connection or dials a new one.
func (c *Client) conn(ctx context.Context) (sc *syncConn, reused bool, err error) {
	if sc := c.pool.get(); sc != nil {
		return sc, true, nil
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	lim := &cappedHeader{r: conn}
	return &syncConn{conn: conn, lim: lim, br: bufio.NewReaderSize(lim, 4096)}, false, nil
}

// exchange writes req on sc and reads the reply's head. written reports
// whether any of the request may have reached the executor.
func (c *Client) exchange(ctx context.Context, sc *syncConn, req *http.Request) (resp *http.Response, written bool, err error) {
	// The context ends the call wherever it blocks: a deadline in the past
	// wakes the read or write at once.
	stop := context.AfterFunc(ctx, func() { _ = sc.conn.SetDeadline(time.Unix(1, 0)) })
	sc.reqBf.Reset()
	if err := req.Write(&sc.reqBf); err != nil {
		stop()
		return nil, false, err
	}
	if n, err := sc.conn.Write(sc.reqBf.Bytes()); err != nil {
		stop()
		return nil, n > 0 || !isClosedByPeer(err), err
	}
	sc.lim.left, sc.lim.off = maxHeaderBytes, false
	resp, err = http.ReadResponse(sc.br, req)
	if err != nil {
		stop()
		return nil, true, err
	}
	if resp.StatusCode < 200 {
		// The API has no interim replies (100 Continue and the like): the
		// final one would be left in the connection for the next call.
		stop()
		resp.Body.Close()
		return nil, true, fmt.Errorf("interim reply HTTP %d: the executor's API sends none", resp.StatusCode)
	}
	sc.lim.off = true // the body is capped by the caller
	resp.Body = &pooledBody{rc: resp.Body, sc: sc, pool: &c.pool, stop: stop, keep: !resp.Close}
	return resp, true, nil
}

// closedEarly reports a reply cut before its status line: the executor
// closed the connection without answering.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// isClosedByPeer reports a write that failed because the executor had
// closed the connection: nothing of it was delivered.
func isClosedByPeer(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// pooledBody returns its connection to the pool once the body was read to
// its end and closed; a body closed early closes the connection.
type pooledBody struct {
	rc   io.ReadCloser
	sc   *syncConn
	pool *connPool
	stop func() bool
	keep bool // the executor did not ask to close the connection
	eof  bool
	done bool
}

func (b *pooledBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *pooledBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.rc.Close()
	// stop reports false once the context ended: the connection's deadline
	// may be in the past.
	if b.stop() && b.eof && b.keep && err == nil {
		b.pool.put(b.sc)
		return nil
	}
	b.sc.conn.Close()
	return err
}
