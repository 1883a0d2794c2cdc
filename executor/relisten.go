package executor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/executor/api"
)

// relistener is the listener the executor's HTTP server accepts on: the
// host's listening socket, which it can let go of for a checkpoint (CRIU
// cannot dump a socket of the host's) and take again from the host
// afterwards, without the HTTP server noticing.
type relistener struct {
	mu     sync.Mutex
	cur    net.Listener  // nil between a detach and an attach
	ready  chan struct{} // closed by attach
	closed bool
	addr   net.Addr
}

func newRelistener(ln net.Listener) *relistener {
	ready := make(chan struct{})
	close(ready)
	return &relistener{cur: ln, ready: ready, addr: ln.Addr()}
}

// Accept waits for a connection on the current listener, and across
// detaches and attaches.
func (l *relistener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		cur, ready, closed := l.cur, l.ready, l.closed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if cur == nil {
			<-ready
			continue
		}
		c, err := cur.Accept()
		if err == nil {
			return c, nil
		}
		l.mu.Lock()
		swapped := l.cur != cur || l.closed
		l.mu.Unlock()
		if !swapped {
			return nil, err
		}
	}
}

// Close closes the current listener; Accept returns net.ErrClosed.
func (l *relistener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var err error
	if l.cur != nil {
		err = l.cur.Close()
	} else {
		close(l.ready)
	}
	return err
}

// Addr is the first listener's address.
func (l *relistener) Addr() net.Addr { return l.addr }

// detach closes the current listener; Accept waits for the next attach.
func (l *relistener) detach() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	if l.cur == nil {
		return errors.New("already waiting for a listener")
	}
	old := l.cur
	l.cur = nil
	l.ready = make(chan struct{})
	return old.Close()
}

// attach makes ln the listener Accept waits on.
func (l *relistener) attach(ln net.Listener) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.cur != nil {
		return errors.New("not waiting for a listener")
	}
	l.cur = ln
	close(l.ready)
	return nil
}

// serving is what Serve serves with.
type serving struct {
	rl    *relistener
	srv   *http.Server
	conns *connTracker
}

// drainTimeout bounds how long a checkpoint waits for the executor's other
// connections to close; one still open makes the dump fail, and says so.
const drainTimeout = 3 * time.Second

// checkpointPrepare handles POST /v1/checkpoint/prepare.
func (s *Server) checkpointPrepare(w http.ResponseWriter, r *http.Request) {
	sv := s.serving.Load()
	if sv == nil {
		writeError(w, http.StatusConflict, api.CodeBusy, "this executor does not serve on a listener it can hand back")
		return
	}
	// A sandbox being checkpointed was claimed (if it was a pool
	// member): the claim defaults file, applied by now if the claim wrote
	// it, has nothing more to say and stays out of the checkpoint.
	s.releaseClaimDefaults()
	var b [12]byte
	_, _ = rand.Read(b[:])
	name := "@sbx-ckpt-" + hex.EncodeToString(b[:])
	placeholder, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		s.fail(w, fmt.Errorf("placeholder socket: %w", err))
		return
	}
	rl, srv := sv.rl, sv.srv
	if err := rl.detach(); err != nil {
		placeholder.Close()
		writeError(w, http.StatusConflict, api.CodeBusy, err.Error())
		return
	}
	// No connection may stay open into the checkpoint: CRIU cannot dump
	// one end of a connection to the host. With keep-alives off, a call in
	// progress closes its connection once answered, and so does this one
	// (the host waits for that close before it dumps).
	srv.SetKeepAlivesEnabled(false)
	if left := sv.conns.drain(r.Context(), drainTimeout); left > 0 {
		s.log.Warn("executor: connections still open for the checkpoint", "count", left)
	}
	// The executor's output goes to a file of the host's, which CRIU
	// cannot dump either: the sandbox's /dev/null until the handover
	// brings the (new) log.
	if err := redirectStdio("/dev/null"); err != nil {
		s.log.Warn("executor: redirect output for the checkpoint", "err", err)
	}
	go s.awaitHandover(rl, srv, placeholder)
	writeJSON(w, http.StatusOK, api.CheckpointPrepared{Listener: name})
}

// awaitHandover serves the placeholder until the host hands over a
// listening socket, then serves HTTP on it.
func (s *Server) awaitHandover(rl *relistener, srv *http.Server, placeholder *net.UnixListener) {
	defer placeholder.Close()
	for {
		c, err := placeholder.AcceptUnix()
		if err != nil {
			s.log.Error("executor: placeholder listener", "err", err)
			return
		}
		ln, err := receiveListener(c)
		if err != nil {
			_, _ = fmt.Fprintf(c, "%.200s\n", err.Error())
			c.Close()
			continue
		}
		if err := rl.attach(ln); err != nil {
			ln.Close()
			_, _ = fmt.Fprintf(c, "%.200s\n", err.Error())
			c.Close()
			return
		}
		srv.SetKeepAlivesEnabled(true)
		_, _ = c.Write([]byte(api.HandoverOK))
		c.Close()
		return
	}
}

// redirectStdio points the standard streams at path.
func redirectStdio(path string) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, to := range []int{0, 1, 2} {
		if err := unix.Dup3(fd, to, 0); err != nil {
			return err
		}
	}
	return nil
}

// receiveListener reads one byte carrying one or two descriptors: a
// listening unix socket, and the file to write output to from now on.
func receiveListener(c *net.UnixConn) (net.Listener, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("read handover: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("read handover: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if len(fds) != 1 && len(fds) != 2 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("handover carried %d descriptors, want 1 or 2", len(fds))
	}
	if len(fds) == 2 {
		for _, to := range []int{1, 2} {
			_ = unix.Dup3(fds[1], to, 0)
		}
		unix.Close(fds[1])
	}
	f := os.NewFile(uintptr(fds[0]), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("handover: not a listening socket: %w", err)
	}
	if _, ok := ln.(*net.UnixListener); !ok {
		ln.Close()
		return nil, errors.New("handover: not a unix socket")
	}
	return ln, nil
}
