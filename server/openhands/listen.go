package openhands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// ListenOptions say where a Runtime API listens and how clients reach it.
type ListenOptions struct {
	// Addr is the TCP address to listen on ("0.0.0.0:8700").
	Addr string
	// PublicHost is the host name or address clients reach Addr at, for
	// runtime URLs; empty means Addr's host, which must then not be an
	// unspecified address.
	PublicHost string
	// PortMode gives every runtime a listener of its own on Addr's host
	// (Config.ListenRuntime), for the SDK's APIRemoteWorkspace; otherwise
	// runtime URLs are <public URL>/<runtime_id> (path mode).
	PortMode bool
}

// Listener is a Runtime API on a TCP listener of its own.
type Listener struct {
	svc *Service
	ln  net.Listener
	hs  *http.Server
}

// Listen opens o.Addr and starts the Runtime API over be with cfg, whose
// PublicURL (and in port mode ListenRuntime) it sets from o.
func Listen(be Backend, cfg Config, o ListenOptions) (*Listener, error) {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("openhands: listen on %s: %w", o.Addr, err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	public := o.PublicHost
	if public == "" {
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("openhands: %s listens on every address: say which one clients reach (the public host)", o.Addr)
		}
		public = host
	}
	cfg.PublicURL = "http://" + net.JoinHostPort(public, port)
	if o.PortMode {
		cfg.ListenRuntime = func(port int) (net.Listener, string, error) {
			rln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return nil, "", err
			}
			return rln, "http://" + net.JoinHostPort(public, strconv.Itoa(rln.Addr().(*net.TCPAddr).Port)), nil
		}
	}
	svc, err := New(be, cfg)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	log := svc.log
	return &Listener{svc: svc, ln: ln, hs: &http.Server{
		Handler:           svc.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}}, nil
}

// Addr is the address the Runtime API listens on.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// PublicURL is the base URL clients reach it at.
func (l *Listener) PublicURL() string { return l.svc.cfg.PublicURL }

// Serve serves until ctx ends or the listener fails, then shuts down:
// requests in flight (WebSockets of the data plane included) get up to
// grace before they are cut, and the Service closes (sandboxes keep
// running; a new Listener over the same state directory takes them up).
// It returns nil after ctx ended, else the listener's error.
func (l *Listener) Serve(ctx context.Context, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- l.hs.Serve(l.ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := l.hs.Shutdown(sctx); err != nil {
		_ = l.hs.Close()
	}
	l.svc.Close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("openhands: serve: %w", serveErr)
	}
	return nil
}

// Close closes a Listener that is not served.
func (l *Listener) Close() {
	_ = l.ln.Close()
	l.svc.Close()
}
