// Package console connects the user's terminal to a command in a sandbox,
// as sbx run -it and sbx exec -it do: raw mode and window size, signals
// passed on, TERM, and the checks and questions a command asks on a
// terminal.
package console

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"
)

// Setup puts the user's terminal (this process's stdin) in raw mode when
// interactive, and follows its size: size is the current one (80x24 when
// stdin is no terminal, with no resize channel), resize gets each change.
// restore puts the terminal back.
func Setup(interactive bool) (restore func(), size [2]uint16, resize chan [2]uint16) {
	restore = func() {}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return restore, [2]uint16{80, 24}, nil
	}
	if w, h, err := term.GetSize(fd); err == nil {
		size = [2]uint16{uint16(w), uint16(h)}
	}
	if interactive {
		if st, err := term.MakeRaw(fd); err == nil {
			restore = func() { _ = term.Restore(fd, st) }
		}
	}
	resize = make(chan [2]uint16, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			if w, h, err := term.GetSize(fd); err == nil {
				select {
				case resize <- [2]uint16{uint16(w), uint16(h)}:
				default:
				}
			}
		}
	}()
	return restore, size, resize
}

// ForwardSignals passes the signals this process receives (SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) on to a sandbox: the channel
// is RunOptions.Signals. A
// second SIGINT or SIGTERM, or 10 seconds without the command exiting,
// kills the sandbox so that nothing is left behind.
func ForwardSignals(ctx context.Context, kill context.CancelFunc) <-chan os.Signal {
	in := takeForwarded()
	if in == nil {
		in = make(chan os.Signal, 8)
		signal.Notify(in, forwarded...)
	}
	out := make(chan os.Signal, 8)
	go func() {
		defer signal.Stop(in)
		var grace <-chan time.Time
		terminating := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-grace:
				kill()
				return
			case s := <-in:
				if s == syscall.SIGINT || s == syscall.SIGTERM {
					if terminating {
						kill()
						return
					}
					terminating = true
					grace = time.After(10 * time.Second)
				}
				select {
				case out <- s:
				default:
				}
			}
		}
	}()
	return out
}

// forwarded are the signals ForwardSignals passes on.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// prepared is the registration PrepareForwardSignals started: the channel
// the signals go to, once done is closed.
var prepared struct {
	sync.Mutex
	in   chan os.Signal
	done chan struct{}
}

// PrepareForwardSignals starts registering this process for the signals
// ForwardSignals passes on, in the background, so that the registration
// overlaps what the caller does before ForwardSignals: each signal's is a
// round trip to the Go runtime's signal thread, about a millisecond for
// the six on a loaded 2-CPU machine. Signals that arrive in between wait
// for ForwardSignals, which takes the registration over (a second call
// starts nothing); StopForwardSignals gives them their default action
// back when the caller forwards none after all.
func PrepareForwardSignals() {
	prepared.Lock()
	defer prepared.Unlock()
	if prepared.in != nil {
		return
	}
	in, done := make(chan os.Signal, 8), make(chan struct{})
	prepared.in, prepared.done = in, done
	go func() {
		signal.Notify(in, forwarded...)
		close(done)
	}()
}

// takeForwarded returns the channel of a prepared registration once it is
// complete, or nil when none was prepared, and forgets it.
func takeForwarded() chan os.Signal {
	prepared.Lock()
	in, done := prepared.in, prepared.done
	prepared.in, prepared.done = nil, nil
	prepared.Unlock()
	if in == nil {
		return nil
	}
	<-done
	return in
}

// StopForwardSignals undoes PrepareForwardSignals: the signals get back
// their default action (or another Notify's).
func StopForwardSignals() {
	if in := takeForwarded(); in != nil {
		signal.Stop(in)
	}
}

// IsTerminal reports whether f (a reader or writer) is a terminal.
func IsTerminal(f any) bool {
	fh, ok := f.(*os.File)
	return ok && term.IsTerminal(int(fh.Fd()))
}

// WithTERM adds this process's TERM to env (KEY=VALUE entries) unless
// env sets it, for a command given a terminal.
func WithTERM(env []string) []string {
	t := os.Getenv("TERM")
	if t == "" {
		return env
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "TERM=") {
			return env
		}
	}
	return append([]string{"TERM=" + t}, env...)
}

// Confirm asks question on out ("... Continue? [y/N] ") and reports
// whether the answer read from in is y or Y; in must be a terminal, else
// it reports false without asking.
func Confirm(in io.Reader, out io.Writer, question string) bool {
	if !IsTerminal(in) {
		return false
	}
	fmt.Fprintf(out, "%s [y/N] ", question)
	var answer string
	_, _ = fmt.Fscanln(in, &answer)
	return answer == "y" || answer == "Y"
}

// SignalContext is cancelled by SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
