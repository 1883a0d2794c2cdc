package egressd

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"
)

// maxPeek caps what the proxy reads before it decides (a ClientHello, an
// HTTP request head).
const maxPeek = 64 << 10

// peekTimeout bounds the wait for the client's first bytes.
const peekTimeout = 10 * time.Second

// extECH is the TLS encrypted_client_hello extension: a hello that carries
// it hides the real server name, so it is refused.
const extECH = 0xfe0d

// hello is what the proxy learnt from the first bytes of a connection.
type hello struct {
	TLS  bool
	Name string // SNI, or the HTTP Host without port
	Port string // the port in the HTTP Host, if any
	Req  *http.Request
	Raw  []byte // every byte read, to replay upstream
}

var errPeekDone = errors.New("client hello read")

// recorder reads from a connection and keeps every byte it read, up to
// maxPeek; it never writes.
type recorder struct {
	r   io.Reader
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	if r.buf.Len() >= maxPeek {
		return 0, errors.New("first bytes too long")
	}
	p = p[:min(len(p), maxPeek-r.buf.Len())]
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

// readOnlyConn lets crypto/tls read a ClientHello from a recorder; writes
// fail, so nothing is ever sent to the client.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c readOnlyConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c readOnlyConn) Write(p []byte) (int, error) { return 0, errors.New("peek: no writes") }

// peek reads the first bytes of conn: a TLS ClientHello (parsed by
// crypto/tls) or an HTTP request head (net/http), with a size cap and a
// deadline.
func peek(conn net.Conn) (*hello, error) {
	_ = conn.SetReadDeadline(time.Now().Add(peekTimeout))
	defer conn.SetReadDeadline(time.Time{})
	rec := &recorder{r: conn}
	br := bufio.NewReaderSize(rec, 4096)
	first, err := br.Peek(1)
	if err != nil {
		return nil, fmt.Errorf("read first byte: %w", err)
	}
	if first[0] == 0x16 { // TLS handshake record
		var info *tls.ClientHelloInfo
		cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			info = h
			return nil, errPeekDone
		}}
		err := tls.Server(readOnlyConn{Conn: conn, r: br}, cfg).Handshake()
		if info == nil {
			return nil, fmt.Errorf("not a TLS client hello: %w", err)
		}
		if slices.Contains(info.Extensions, extECH) {
			return &hello{TLS: true, Name: info.ServerName, Raw: rec.buf.Bytes()}, errors.New("client hello uses encrypted client hello (ECH)")
		}
		return &hello{TLS: true, Name: info.ServerName, Raw: rec.buf.Bytes()}, nil
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, fmt.Errorf("neither TLS nor an HTTP request: %w", err)
	}
	h := &hello{Req: req, Raw: rec.buf.Bytes()}
	h.Name = req.Host
	if host, port, err := net.SplitHostPort(req.Host); err == nil {
		h.Name, h.Port = host, port
	}
	return h, nil
}

// replayConn is a connection whose first reads return bytes already read.
type replayConn struct {
	net.Conn
	r io.Reader
}

func newReplayConn(c net.Conn, first []byte) *replayConn {
	return &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(first), c)}
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the underlying TCP connection.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
