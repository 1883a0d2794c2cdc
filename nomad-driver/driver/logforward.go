package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/client/lib/fifo"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// logOffsetFile is where, in the task directory (Nomad's; the sandbox
// does not see it), the driver keeps how far the task's output has been
// forwarded.
const logOffsetFile = ".sbx-log-offset"

// forwardLogs copies the main command's output into the task's stdout and
// stderr FIFOs, from the offset saved by the previous forwarder (a
// restarted plugin resumes where the old one stopped), until the command
// has ended for good or the handle is cancelled.
//
// Neither a restarted plugin nor a replaced reader duplicates or drops
// output:
//   - the end offset of every chunk is saved before the chunk is written,
//     so a chunk is never written twice; a plugin killed between the save
//     and the write (kill -9 of the plugin itself) loses that one chunk;
//     a plugin that is cancelled (its client died) stops between chunks;
//   - when a write fails because the FIFOs' reader (Nomad's logmon) went
//     away, as when a restarted client replaces it, the offset goes back
//     to the bytes actually written, and the old FIFOs stay open until the
//     new reader has opened them: what the old reader left unread in the
//     pipe stays there for the new one (a FIFO's pipe lives as long as one
//     of its ends is open).
func (h *taskHandle) forwardLogs() {
	if h.cfg.StdoutPath == "" || h.cfg.StderrPath == "" {
		return
	}
	off, err := openLogOffset(filepath.Join(h.cfg.TaskDir().Dir, logOffsetFile))
	if err != nil {
		h.logger.Error("cannot keep the log offset: a restarted plugin will forward the output from the start again", "error", err)
	}
	defer off.close()
	var out *fifoPair
	defer func() { out.close() }()
	for attempt := 0; ; attempt++ {
		if out == nil || out.broken {
			next, err := openFIFOs(h.ctx, h.cfg.StdoutPath, h.cfg.StderrPath)
			if err != nil {
				if h.ctx.Err() != nil {
					return
				}
				h.logger.Warn("open the log fifos; retrying", "error", err)
				if !h.pause(attempt) {
					return
				}
				continue
			}
			// The new reader has the pipe now: let go of the old ends.
			out.close()
			out = next
		}
		err := h.forwardFrom(out, off)
		switch {
		case err == nil || h.ctx.Err() != nil:
			// The command has ended and its output is all in, or the
			// handle is cancelled.
			return
		case out.broken:
			// The reader went away (a restarted client replaces its
			// logmon): the next open waits for the new one.
			h.logger.Debug("the log fifos' reader went away; waiting for the next one", "offset", off.get(), "error", err)
			attempt = -1
			continue
		case errors.Is(err, sbx.ErrNotFound) || errors.Is(err, sbx.ErrState):
			// The sandbox is gone, or its output is no longer anywhere.
			h.logger.Warn("log forwarding ends", "offset", off.get(), "error", err)
			return
		}
		h.logger.Warn("log forwarding interrupted; resuming", "offset", off.get(), "error", err)
		if !h.pause(attempt) {
			return
		}
	}
}

// forwardFrom forwards the output from the saved offset into out until the
// command has ended for good (nil), a write fails (out.broken is set) or
// the stream fails.
func (h *taskHandle) forwardFrom(out *fifoPair, off *logOffset) error {
	return h.sbxs.Logs(h.ctx, h.sandboxID, sbx.LogOptions{Since: off.get(), Follow: true}, func(f sbx.LogFrame) error {
		// A cancelled handle stops between chunks, never inside one.
		if err := h.ctx.Err(); err != nil {
			return err
		}
		switch f.Type {
		case sbx.LogStdout, sbx.LogStderr:
			w := out.stdout
			if f.Type == sbx.LogStderr {
				w = out.stderr
			}
			off.save(f.Offset + int64(len(f.Data)))
			if n, err := io.WriteString(w, f.Data); err != nil {
				off.save(f.Offset + int64(n))
				out.broken = true
				return fmt.Errorf("write to the log fifo: %w", err)
			}
		case sbx.LogGap:
			off.save(f.Offset + f.Lost)
			if _, err := fmt.Fprintf(out.stderr, "[sbx: %d bytes of output were lost: the sandbox keeps only the latest]\n", f.Lost); err != nil {
				off.save(f.Offset)
				out.broken = true
				return fmt.Errorf("write to the log fifo: %w", err)
			}
		case sbx.LogEnd:
			off.save(f.Offset)
		}
		return nil
	})
}

// pause waits before the next attempt (1 s more each time, up to 5 s); it
// reports false when the handle was cancelled meanwhile.
func (h *taskHandle) pause(attempt int) bool {
	t := time.NewTimer(time.Duration(min(attempt+1, 5)) * time.Second)
	defer t.Stop()
	select {
	case <-h.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fifoPair is the writing end of a task's two log FIFOs.
type fifoPair struct {
	stdout, stderr io.WriteCloser
	// broken is set when a write failed: the pair is kept open until a
	// new one is, then closed.
	broken bool
}

// close closes both ends; a nil pair is a no-op.
func (p *fifoPair) close() {
	if p == nil {
		return
	}
	p.stdout.Close()
	p.stderr.Close()
}

// openFIFOs opens both log FIFOs for writing, each once its reader (the
// client's logmon) has it open; ctx bounds the wait.
func openFIFOs(ctx context.Context, stdoutPath, stderrPath string) (*fifoPair, error) {
	stdout, err := openFIFO(ctx, stdoutPath)
	if err != nil {
		return nil, fmt.Errorf("open the stdout log fifo: %w", err)
	}
	stderr, err := openFIFO(ctx, stderrPath)
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("open the stderr log fifo: %w", err)
	}
	return &fifoPair{stdout: stdout, stderr: stderr}, nil
}

// openFIFO opens a log FIFO for writing; it blocks until the reader has it
// open, so ctx bounds it.
func openFIFO(ctx context.Context, path string) (io.WriteCloser, error) {
	type result struct {
		w   io.WriteCloser
		err error
	}
	ch := make(chan result, 1)
	go func() {
		w, err := fifo.OpenWriter(path)
		ch <- result{w, err}
	}()
	select {
	case r := <-ch:
		return r.w, r.err
	case <-ctx.Done():
		// Unblock the open by being a reader ourselves, then close both.
		if rf, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
			if r := <-ch; r.w != nil {
				r.w.Close()
			}
			rf.Close()
		}
		return nil, ctx.Err()
	}
}

// logOffset is how far the task's output has been forwarded, kept in a
// file so that a restarted plugin resumes there. A save is one pwrite of a
// fixed-width number at the file's start (a few microseconds, see
// BenchmarkLogOffsetSave): a plugin killed at any point leaves the old or
// the new number, never a torn one. There is no fsync: the offset has to
// outlive the plugin, not the machine (the sandbox does not survive a
// reboot either).
type logOffset struct {
	f   *os.File // nil when the file could not be opened: kept in memory only
	cur int64
	buf [logOffsetWidth + 1]byte
}

// logOffsetWidth is the number of digits saved: any int64 fits.
const logOffsetWidth = 20

// openLogOffset opens (or creates) the offset file at path and reads the
// saved offset (0 when none or unreadable). On error it still returns a
// usable logOffset that keeps the offset in memory only.
func openLogOffset(path string) (*logOffset, error) {
	o := &logOffset{}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return o, fmt.Errorf("open the log offset file: %w", err)
	}
	o.f = f
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	if v, err := strconv.ParseInt(strings.TrimSpace(string(b[:n])), 10, 64); err == nil && v > 0 {
		o.cur = v
	}
	return o, nil
}

// get returns the offset to resume from.
func (o *logOffset) get() int64 { return o.cur }

// save records n as the offset to resume from.
func (o *logOffset) save(n int64) {
	o.cur = n
	if o.f == nil {
		return
	}
	s := strconv.FormatInt(max(n, 0), 10)
	for i := range logOffsetWidth - len(s) {
		o.buf[i] = '0'
	}
	copy(o.buf[logOffsetWidth-len(s):], s)
	o.buf[logOffsetWidth] = '\n'
	_, _ = o.f.WriteAt(o.buf[:], 0)
}

// close closes the offset file.
func (o *logOffset) close() {
	if o.f != nil {
		o.f.Close()
	}
}
