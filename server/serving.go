package server

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/sbxrun/sbx/dockerargs"
)

// ListenConfig says where a server listens, as sbx serve's flags say it.
type ListenConfig struct {
	// TCP is a TCP address ("127.0.0.1:7070"); it needs Token unless
	// InsecureNoAuth is set.
	TCP string
	// Unix is a unix socket path (ListenUnix); without TCP it defaults to
	// DefaultUnix.
	Unix, DefaultUnix string
	// TLSCert and TLSKey (PEM, both or neither) serve TLS on TCP.
	TLSCert, TLSKey string
	// Token is the bearer token the server will require (Config.Token).
	Token string
	// InsecureNoAuth allows a TCP listener without a token.
	InsecureNoAuth bool
}

// Check refuses a TCP listener without a token (unless InsecureNoAuth),
// half a TLS pair, and TLS without TCP.
func (c *ListenConfig) Check() error {
	if c.TCP != "" && c.Token == "" && !c.InsecureNoAuth {
		return errors.New("a TCP listener needs a token (--token-file F); to serve without one, add --insecure-no-auth")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("give both --tls-cert and --tls-key, or neither")
	}
	if c.TLSCert != "" && c.TCP == "" {
		return errors.New("--tls-cert applies to the TCP listener: add --listen ADDR")
	}
	return nil
}

// Listen opens the listeners: TCP first, then the unix socket. close
// closes them and removes the socket; Serve closes them itself, so after
// Serve close only removes the socket.
func (c *ListenConfig) Listen() (listeners []net.Listener, close func(), err error) {
	sock := ""
	close = func() {
		for _, l := range listeners {
			_ = l.Close()
		}
		if sock != "" {
			_ = os.Remove(sock)
		}
	}
	if c.TCP != "" {
		ln, err := ListenTCP(c.TCP, c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, nil, err
		}
		listeners = append(listeners, ln)
	}
	path := c.Unix
	if path == "" && c.TCP == "" {
		path = c.DefaultUnix
	}
	if path != "" {
		ln, err := ListenUnix(path)
		if err != nil {
			close()
			return nil, nil, err
		}
		listeners = append(listeners, ln)
		sock = path
	}
	return listeners, close, nil
}

// URL is how a client (sbx --host) names ln: unix://PATH, http://ADDR or
// https://ADDR.
func URL(ln net.Listener, tls bool) string {
	switch {
	case ln.Addr().Network() == "unix":
		return "unix://" + ln.Addr().String()
	case tls:
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// Companion is an API served beside the REST API, stopped with it (an
// OpenHands Runtime API listener).
type Companion interface {
	Serve(ctx context.Context, grace time.Duration) error
	Addr() net.Addr
}

// ServeWith serves the REST API on listeners and each companion until
// ctx ends or one of them fails, then stops them all with the same grace
// (Serve). A companion's failure is logged and stops the rest; the REST
// API's own error is returned.
func (s *Server) ServeWith(ctx context.Context, listeners []net.Listener, grace time.Duration, companions ...Companion) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, c := range companions {
		wg.Go(func() {
			if err := c.Serve(ctx, grace); err != nil {
				s.log.Error("sbx serve: a companion API stopped", "addr", c.Addr().String(), "err", err)
				stop()
			}
		})
	}
	err := s.Serve(ctx, listeners, grace)
	stop()
	wg.Wait()
	return err
}

// ParseSizes sets MaxBodyBytes, MaxUploadBytes and MaxReplyBytes from
// sizes in docker's forms ("1m", "1g"), as sbx serve's --max-body-size,
// --max-upload-size and --max-reply-size give them.
func (c *Config) ParseSizes(body, upload, reply string) error {
	for _, s := range []struct {
		flag, v string
		to      *int64
	}{{"max-body-size", body, &c.MaxBodyBytes}, {"max-upload-size", upload, &c.MaxUploadBytes}, {"max-reply-size", reply, &c.MaxReplyBytes}} {
		n, err := dockerargs.ParseSize(s.flag, s.v)
		if err != nil {
			return err
		}
		*s.to = n
	}
	return nil
}
