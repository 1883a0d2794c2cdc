package inspect

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sbxrun/sbx/egress"
	"github.com/sbxrun/sbx/egress/tlsca"
)

// Inspector serves the inspected connections of every sandbox: it is the
// egress.Inspector of the egress proxy. It is safe for concurrent use;
// Close stops it.
type Inspector struct {
	// RootCAs verify the real hosts; nil means the host's system roots.
	roots *x509.CertPool
	srv   *http.Server
	ln    *chanListener

	mu     sync.Mutex
	states map[string]*sandboxState
}

// New starts an Inspector that verifies real hosts against roots (nil:
// the system roots).
func New(roots *x509.CertPool) *Inspector {
	i := &Inspector{roots: roots, ln: newChanListener(), states: map[string]*sandboxState{}}
	i.srv = &http.Server{
		Handler:           http.HandlerFunc(i.serveHTTP),
		ConnContext:       withConn,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	go func() { _ = i.srv.Serve(i.ln) }()
	return i
}

// Close stops serving and closes every connection.
func (i *Inspector) Close() error { return i.srv.Close() }

var _ egress.Inspector = (*Inspector)(nil)

// Serve takes over conn (it closes it) for c and returns when the
// sandbox's connection is done or ctx ends.
func (i *Inspector) Serve(ctx context.Context, conn net.Conn, c egress.Conn) error {
	st, err := i.state(c.Sandbox.StateDir)
	if err != nil {
		conn.Close()
		return err
	}
	hc := &handedConn{Conn: conn, c: c, st: st, done: make(chan struct{})}
	hc.proxy = i.newProxy(hc)
	var nc net.Conn = hc
	if c.TLS {
		if st.ca == nil {
			conn.Close()
			return fmt.Errorf("sandbox %s has no egress CA to inspect %s with", c.Sandbox.ID, c.SNI)
		}
		nc = tls.Server(hc, &tls.Config{
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2", "http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return st.ca.Leaf(c.SNI)
			},
		})
	}
	if err := i.ln.push(ctx, nc); err != nil {
		conn.Close()
		return err
	}
	select {
	case <-hc.done:
	case <-ctx.Done():
		nc.Close()
		<-hc.done
	}
	return nil
}

// sandboxState is a sandbox's CA and secrets, loaded from its state dir
// and loaded again when the files change.
type sandboxState struct {
	ca      *tlsca.Authority
	secrets []Secret
	scrub   *scrubber
	stamp   string
}

// state returns the loaded state of dir, reloading it when its files
// changed since.
func (i *Inspector) state(dir string) (*sandboxState, error) {
	if dir == "" {
		return nil, errors.New("no egress state directory for the sandbox")
	}
	stamp := fileStamp(filepath.Join(dir, tlsca.KeyFile)) + "|" + fileStamp(filepath.Join(dir, SecretsFile))
	i.mu.Lock()
	defer i.mu.Unlock()
	if st, ok := i.states[dir]; ok && st.stamp == stamp {
		return st, nil
	}
	st := &sandboxState{stamp: stamp}
	if _, err := os.Lstat(filepath.Join(dir, tlsca.KeyFile)); err == nil {
		if st.ca, err = tlsca.Load(dir); err != nil {
			return nil, err
		}
	}
	var err error
	if st.secrets, err = LoadSecrets(dir); err != nil {
		return nil, err
	}
	st.scrub = newScrubber(st.secrets)
	i.states[dir] = st
	return st, nil
}

// Forget drops the cached state of a sandbox's state dir (at remove).
func (i *Inspector) Forget(dir string) {
	i.mu.Lock()
	delete(i.states, dir)
	i.mu.Unlock()
}

// fileStamp identifies a file's version by inode, size and time.
func fileStamp(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return "-"
	}
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano(), fi.Sys())
}

// handedConn is a connection handed over, with what it is for.
type handedConn struct {
	net.Conn
	c     egress.Conn
	st    *sandboxState
	proxy http.Handler
	once  sync.Once
	done  chan struct{}
}

func (h *handedConn) Close() error {
	err := h.Conn.Close()
	h.once.Do(func() { close(h.done) })
	return err
}

type connKey struct{}

// withConn puts the handed connection behind nc into the context of its
// requests.
func withConn(ctx context.Context, nc net.Conn) context.Context {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if hc, ok := nc.(*handedConn); ok {
		return context.WithValue(ctx, connKey{}, hc)
	}
	return ctx
}

// chanListener is a net.Listener fed by Serve.
type chanListener struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) push(ctx context.Context, c net.Conn) error {
	select {
	case l.ch <- c:
		return nil
	case <-l.closed:
		return errors.New("the inspector is closed")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4zero} }
