package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stateWatch wakes the watcher when another process changes the state
// directory: a sandbox directory appears or goes (a create's rename into
// place, a remove's rename out), or a record is replaced in one. It
// watches the sandboxes directory and each sandbox's own directory with
// inotify; what changes without a file (a PID 1 that dies, a main command
// that ends) is still found by the periodic look.
type stateWatch struct {
	dir  string
	f    *os.File // the inotify descriptor, non-blocking, so Close ends a Read
	wake chan struct{}

	mu  sync.Mutex
	wds map[int32]bool // watches on sandbox directories
}

// stateWatchDirMask is what the sandboxes directory reports: entries
// made, removed or renamed in or out.
const stateWatchDirMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_ONLYDIR

// stateWatchSandboxMask is what a sandbox's directory reports: its record
// replaced (written beside and renamed over) or written in place.
const stateWatchSandboxMask = unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_ONLYDIR

// newStateWatch watches dir (the state root's sandboxes directory) and
// every sandbox directory in it.
func newStateWatch(dir string) (*stateWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &stateWatch{dir: dir, f: os.NewFile(uintptr(fd), "inotify"), wake: make(chan struct{}, 1), wds: map[int32]bool{}}
	if _, err := unix.InotifyAddWatch(fd, dir, stateWatchDirMask); err != nil {
		_ = w.f.Close()
		return nil, fmt.Errorf("inotify: watch %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		_ = w.f.Close()
		return nil, fmt.Errorf("inotify: list %s: %w", dir, err)
	}
	for _, e := range entries {
		w.watchSandbox(e.Name())
	}
	go w.read()
	return w, nil
}

// watchSandbox adds a watch on the sandbox directory name, unless it is a
// hidden (half-made or half-removed) entry. A directory that went again
// is no error: its removal woke the watcher already.
func (w *stateWatch) watchSandbox(name string) {
	if strings.HasPrefix(name, ".") {
		return
	}
	wd, err := unix.InotifyAddWatch(int(w.f.Fd()), filepath.Join(w.dir, name), stateWatchSandboxMask)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.wds[int32(wd)] = true
	w.mu.Unlock()
}

// read turns inotify events into wake-ups (at most one pending) until the
// descriptor is closed.
func (w *stateWatch) read() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				close(w.wake) // the watcher falls back to its periodic look
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameLen := int(ev.Len)
			if off+unix.SizeofInotifyEvent+nameLen > n {
				break
			}
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+nameLen]), "\x00")
			off += unix.SizeofInotifyEvent + nameLen
			switch {
			case ev.Mask&unix.IN_IGNORED != 0:
				w.mu.Lock()
				delete(w.wds, ev.Wd)
				w.mu.Unlock()
				continue
			case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && ev.Mask&unix.IN_ISDIR != 0:
				w.watchSandbox(name)
			}
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// close ends the watch.
func (w *stateWatch) close() { _ = w.f.Close() }
