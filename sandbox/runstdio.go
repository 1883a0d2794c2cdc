package sandbox

import (
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// runStdio gives a one-shot run's command pipes for the caller's streams,
// and copies between them on the host side, as docker does. Handed the
// caller's own file (sbx run >> jobs.log), the command could reopen it
// through /proc/self/fd/1 and read the earlier output it is appended to,
// or truncate and rewrite it. A terminal given as input (sbx run -i from
// a terminal) is passed as it is: it is not the sandbox's controlling
// terminal (TIOCSTI is refused), and line editing needs it. With a
// terminal of its own (-t) the command has the console and none of this
// applies. In a private user namespace the pipes belong to the sandbox's
// root, so that it can reopen them (echo > /dev/stderr), as a
// process may reopen its own pipes.
type runStdio struct {
	in            io.Reader
	out, err      io.Writer
	closeOnStart  []*os.File // the sandbox's ends, held by it once started
	readers       []*os.File // the host's ends of the output pipes
	copies        sync.WaitGroup
	stdinOwnedEnd *os.File // the host's end of the input pipe
}

// newRunStdio sets up the command's input and output for o; owner, if
// not -1, is the host id of the sandbox's root (a private user namespace),
// given the pipes.
func newRunStdio(o *sbx.RunOptions, owner int) (*runStdio, error) {
	s := &runStdio{in: o.Stdin, out: o.Stdout, err: o.Stderr}
	if o.Tty {
		return s, nil
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil && owner >= 0 {
			// Both ends are one inode.
			if err = r.Chown(owner, owner); err != nil {
				r.Close()
				w.Close()
			}
		}
		return r, w, err
	}
	if f, ok := o.Stdin.(*os.File); o.Stdin != nil && !(ok && isTerminal(f)) {
		r, w, err := pipe()
		if err != nil {
			return nil, err
		}
		s.in, s.stdinOwnedEnd = r, w
		s.closeOnStart = append(s.closeOnStart, r)
		// Not waited for: it ends when the input does or the command's
		// end of the pipe closes (EPIPE).
		go func() {
			_, _ = io.Copy(w, o.Stdin)
			w.Close()
		}()
	}
	for i, dst := range []*io.Writer{&s.out, &s.err} {
		to := *dst
		if to == nil {
			continue
		}
		if i == 1 && sameWriter(o.Stdout, o.Stderr) {
			// One writer for both streams gets one pipe, as os/exec
			// does: two copies would write to it at once.
			s.err = s.out
			continue
		}
		r, w, err := pipe()
		if err != nil {
			s.abort()
			return nil, err
		}
		*dst = w
		s.closeOnStart = append(s.closeOnStart, w)
		s.readers = append(s.readers, r)
		s.copies.Add(1)
		go func() {
			defer s.copies.Done()
			_, _ = io.Copy(to, r)
		}()
	}
	return s, nil
}

// started closes the host's copies of the sandbox's ends.
func (s *runStdio) started() {
	for _, f := range s.closeOnStart {
		f.Close()
	}
	s.closeOnStart = nil
}

// finish waits, once the command's init has ended, until its output is
// copied: the pipes close when the last process of the sandbox is gone
// (the kernel kills them with the init). A process that cannot die for
// long (stuck in the kernel) gets outputGrace, then its output is cut.
func (s *runStdio) finish() {
	s.started()
	done := make(chan struct{})
	go func() { s.copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(outputGrace):
	}
	for _, r := range s.readers {
		r.Close()
	}
	if s.stdinOwnedEnd != nil {
		s.stdinOwnedEnd.Close()
	}
}

// abort releases everything when the run does not start.
func (s *runStdio) abort() {
	s.started()
	for _, r := range s.readers {
		r.Close()
	}
	s.copies.Wait()
}

// outputGrace bounds how long a run waits for its output after the init
// ended.
const outputGrace = 10 * time.Second

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// sameWriter reports whether a and b are the same writer; writers whose
// types cannot be compared are taken as different.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a != nil && a == b
}
