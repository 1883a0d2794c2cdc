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
	in := make(chan os.Signal, 8)
	out := make(chan os.Signal, 8)
	signal.Notify(in, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
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
