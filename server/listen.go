package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ListenUnix listens on a unix socket that only its owner (root) may use:
// the socket is created inside a umask of 077 and then chmod 0600, and a
// stale socket of a dead server is replaced.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the socket's directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket; remove it or choose another --unix path", path)
		}
		if err := waitNoListener(path, staleSocketWait); err != nil {
			return nil, err
		}
		_ = os.Remove(path)
	}
	old := syscall.Umask(0o077)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}

// staleSocketWait is how long ListenUnix waits for a socket that still
// accepts to stop: a server killed a moment ago may still be going.
var staleSocketWait = 2 * time.Second

// waitNoListener returns nil once nothing listens on the unix socket at
// path (a connection is refused, or the file is gone), or, after wait, an
// error naming the processes that hold its listening socket. A listener
// whose backlog is full (a busy server) refuses nothing: its connection
// fails with EAGAIN, which is not taken for a stale socket.
func waitNoListener(path string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if c != nil {
			_ = c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another server is listening on %s%s", path, describeHolders(socketHolders(path)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// socketHolders lists the processes (PID and command name) that hold the
// listening unix socket bound at path, as far as /proc shows them.
func socketHolders(path string) []string {
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return nil
	}
	inodes := map[string]bool{}
	// Num RefCount Protocol Flags Type St Inode Path; a listener's flags
	// have __SO_ACCEPTCON (1<<16).
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 || f[7] != path {
			continue
		}
		if flags, err := strconv.ParseUint(f[3], 16, 32); err == nil && flags&(1<<16) != 0 {
			inodes["socket:["+f[6]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	var out []string
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	seen := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !inodes[target] {
			continue
		}
		pid := strings.Split(fd, "/")[2]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		comm, _ := os.ReadFile("/proc/" + pid + "/comm")
		out = append(out, "PID "+pid+" "+strings.TrimSpace(string(comm)))
	}
	return out
}

// describeHolders says which processes hold a socket, for an error.
func describeHolders(holders []string) string {
	if len(holders) == 0 {
		return ""
	}
	return " (held by " + strings.Join(holders, ", ") + ")"
}

// ListenTCP listens on a TCP address; with certFile and keyFile (PEM) it
// serves TLS 1.2 or later over HTTP/1.1, which the streaming and upgraded
// routes need.
func ListenTCP(addr, certFile, keyFile string) (net.Listener, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("give both a TLS certificate and its key, or neither")
	}
	var cfg *tls.Config
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS certificate: %w", err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return ln, nil
}

// MinTokenLength is the shortest bearer token ReadToken accepts.
const MinTokenLength = 16

// ReadToken reads a bearer token from a file (surrounding white space
// dropped), refusing one shorter than MinTokenLength.
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if len(token) < MinTokenLength {
		return "", fmt.Errorf("the token in %s has %d characters: use at least %d (e.g. openssl rand -hex 32)", path, len(token), MinTokenLength)
	}
	return token, nil
}

// Serve serves the API on every listener until ctx ends or one of them
// fails, then shuts down gracefully: streams end, requests in flight get
// up to grace to finish before they are cut, the listeners are closed and
// so is s (sandboxes keep running). It returns nil after ctx ended, else
// the listener's error.
func (s *Server) Serve(ctx context.Context, listeners []net.Listener, grace time.Duration) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	hs.RegisterOnShutdown(s.Shutdown)
	errc := make(chan error, len(listeners))
	for _, ln := range listeners {
		go func(ln net.Listener) { errc <- hs.Serve(ln) }(ln)
	}
	var serveErr error
	select {
	case <-ctx.Done():
		s.log.Info("sbx serve: shutting down; sandboxes keep running")
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("sbx serve: requests still running at the shutdown deadline were cut", "err", err)
		_ = hs.Close()
	}
	s.Close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return nil
}
