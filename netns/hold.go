package netns

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/childexit"
	"github.com/sbxrun/sbx/internal/helperbin"
)

// A published port is a kernel rule (DNAT), not a socket: a host service
// that bound the port later would start normally and every local
// connection to it would reach the sandbox. So, as docker-proxy does, a
// socket bound to each published host port (a listening TCP socket, a
// bound UDP socket) is held for as long as the lease publishes the port.
// The traffic still goes by the rules (they act before any socket is
// looked up); the sockets are never read.
//
// They are held by a small process of their own on the host, sbx-hold
// (cmd/sbx-hold), recorded in the lease: a sandbox outlives the sbx
// process that created it (no daemon), and the executor inside it is
// hostile (a UDP socket of the host's namespace would let it send from
// the host; closing the sockets would give the port away). The lease's
// teardown kills the holder after its rules are gone; a holder whose
// starter died before recording it exits by itself (its ready pipe
// closes), so none is ever left unrecorded.

// holder is the process that holds a lease's published ports.
type holder struct {
	PID int `json:"pid"`
	// Start is the process's start time (clock ticks since boot, field 22
	// of /proc/PID/stat): a PID reused by another process is never killed.
	Start uint64 `json:"start"`
}

// closeHeld closes the sockets of held ports.
func closeHeld(socks []*os.File) {
	for _, f := range socks {
		f.Close()
	}
}

// socketFunc makes an unbound IPv4 socket of type typ (unix.SOCK_STREAM
// or unix.SOCK_DGRAM) for holdPort: newSocket, in the current thread's
// namespace, or Network.stockedSocket.
type socketFunc func(typ int) (int, error)

func newSocket(typ int) (int, error) {
	return unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
}

// holdPort binds the mapping's host address and port (0: any) on a socket
// sock makes and returns the socket (listening for TCP) and the port it
// holds. A port a host process holds is sbx.ErrPortInUse.
func holdPort(p PortMapping, sock socketFunc) (*os.File, uint16, error) {
	typ := unix.SOCK_STREAM
	if p.Proto == UDP {
		typ = unix.SOCK_DGRAM
	}
	fd, err := sock(typ)
	if err != nil {
		return nil, 0, fmt.Errorf("hold host port %s: %w", p, err)
	}
	fail := func(err error) (*os.File, uint16, error) {
		unix.Close(fd)
		return nil, 0, err
	}
	sa := &unix.SockaddrInet4{Port: int(p.HostPort)}
	if p.HostIP.IsValid() {
		sa.Addr = p.HostIP.As4()
	}
	if err := unix.Bind(fd, sa); err != nil {
		switch {
		case errors.Is(err, unix.EADDRINUSE):
			return fail(fmt.Errorf("%w: host port %s is in use by a process on the host; choose another port or 0 for a free one", sbx.ErrPortInUse, p))
		case errors.Is(err, unix.EADDRNOTAVAIL):
			return fail(fmt.Errorf("%w: host address %s of --publish %s is not an address of this host", sbx.ErrInvalid, p.HostIP, p))
		case errors.Is(err, unix.EACCES):
			return fail(fmt.Errorf("host port %s: permission denied", p))
		}
		return fail(fmt.Errorf("hold host port %s: %w", p, err))
	}
	if p.Proto != UDP {
		// Listening: a bound socket alone would let a later bind with
		// SO_REUSEADDR share the port. Nothing is ever accepted: the
		// rules take every connection before it could reach the socket.
		if err := unix.Listen(fd, 1); err != nil {
			return fail(fmt.Errorf("hold host port %s: %w", p, err))
		}
	} else {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 0)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return fail(fmt.Errorf("hold host port %s: %w", p, err))
	}
	return os.NewFile(uintptr(fd), "port "+p.String()), uint16(got.(*unix.SockaddrInet4).Port), nil
}

// holderPath returns the sbx-hold binary: Config.PortHolder, or the
// embedded one written out under the state directory.
func (n *Network) holderPath() (string, error) {
	if n.cfg.PortHolder != "" {
		return n.cfg.PortHolder, nil
	}
	return helperbin.Install(filepath.Join(n.cfg.StateDir, "helpers"), helperbin.Hold)
}

// startHolder starts the process that holds socks and returns it with the
// write end of its ready pipe: record the holder in the lease, then call
// releaseHolder; closing the pipe without it ends the holder. Without
// sockets it does nothing.
func (n *Network) startHolder(socks []*os.File) (*holder, *os.File, error) {
	if len(socks) == 0 {
		return nil, nil, nil
	}
	return n.spawnHolder(socks)
}

// A warm pool's member publishes no ports, but the claim that takes it
// may, and starting a holder then is most of what publishing costs (an
// exec, milliseconds on a busy host). So a member is attached with a
// standby holder (AttachOptions.Standby): started with it and recorded in
// its lease, it listens on a unix socket of the state directory
// (holders/KEY.sock), and the claim hands it the ports' sockets there
// (SCM_RIGHTS) instead of starting one. Sockets in flight stay bound
// until the holder takes them; a claim that cannot reach the holder
// starts one of its own.

// standbyDir holds the sockets of standby holders.
const standbyDir = "holders"

// maxHandedPorts bounds the sockets handed to a standby holder at once
// (sbx-hold's MAX_FDS); a claim that publishes more starts a holder.
const maxHandedPorts = 64

func (n *Network) standbyPath(l *lease) string {
	return filepath.Join(n.cfg.StateDir, standbyDir, l.Key+".sock")
}

// startStandbyHolder starts the standby holder of lease l (which publishes
// no ports), listening on standbyPath, and returns it with the write end
// of its ready pipe, as startHolder does.
func (n *Network) startStandbyHolder(l *lease) (*holder, *os.File, error) {
	path := n.standbyPath(l)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("standby port holder: %w", err)
	}
	_ = os.Remove(path)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("standby port holder: %w", err)
	}
	lf := os.NewFile(uintptr(fd), "standby")
	defer lf.Close()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, nil, fmt.Errorf("standby port holder: bind %s: %w", path, err)
	}
	if err := unix.Listen(fd, 4); err != nil {
		_ = os.Remove(path)
		return nil, nil, fmt.Errorf("standby port holder: %w", err)
	}
	h, ready, err := n.spawnHolder([]*os.File{lf}, "4")
	if err != nil {
		_ = os.Remove(path)
	}
	return h, ready, err
}

// handToHolder gives the sockets of published ports to the standby holder
// of l, which holds them from then on. Its socket (standbyPath), of no more
// use, is left for the caller to remove.
func (n *Network) handToHolder(l *lease, socks []*os.File) error {
	if len(socks) > maxHandedPorts {
		return fmt.Errorf("%d ports are more than a standby holder takes (%d)", len(socks), maxHandedPorts)
	}
	path := n.standbyPath(l)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return fmt.Errorf("reach the standby port holder at %s: %w", path, err)
	}
	fds := make([]int, len(socks))
	for i, f := range socks {
		fds[i] = int(f.Fd())
	}
	if err := unix.Sendmsg(fd, []byte{'p'}, unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("hand the published ports to their holder: %w", err)
	}
	return nil
}

// spawnHolder starts sbx-hold with files as its descriptors 4 and up and
// args after its ready descriptor and state directory.
func (n *Network) spawnHolder(files []*os.File, args ...string) (*holder, *os.File, error) {
	path, err := n.holderPath()
	if err != nil {
		return nil, nil, fmt.Errorf("hold published ports: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("hold published ports: %w", err)
	}
	defer r.Close()
	// The state directory names the holders of this Network for GC.
	cmd := exec.Command(path, append([]string{"3", n.cfg.StateDir}, args...)...)
	cmd.ExtraFiles = append([]*os.File{r}, files...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("hold published ports: start %s: %w", path, err)
	}
	// Reap it when it ends while this process lives (a server); else
	// init does. The wait is in the runtime's poller (childexit), holding
	// no thread and none of the scheduler's Ps while the holder lives.
	go func() {
		_ = childexit.Exited(cmd.Process.Pid) // on error, the wait below blocks
		_ = cmd.Wait()
	}()
	start, err := procStart(cmd.Process.Pid)
	if err != nil {
		w.Close()
		_ = cmd.Process.Kill()
		return nil, nil, fmt.Errorf("hold published ports: %w", err)
	}
	return &holder{PID: cmd.Process.Pid, Start: start}, w, nil
}

// releaseHolder tells the holder it is recorded: from now on only the
// lease's teardown ends it.
func releaseHolder(ready *os.File) error {
	if ready == nil {
		return nil
	}
	defer ready.Close()
	if _, err := ready.Write([]byte{'g'}); err != nil {
		return fmt.Errorf("hold published ports: the holder ended early: %w", err)
	}
	return nil
}

// procStart returns the start time of process pid (field 22 of its stat).
func procStart(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// stopHolder kills the holder of a lease and waits until it is gone (its
// sockets closed), so the ports are free when teardown returns. A holder
// already gone, or a PID now used by another process, is fine.
func stopHolder(h *holder) error {
	if h == nil || h.PID <= 0 {
		return nil
	}
	pfd, err := unix.PidfdOpen(h.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop the holder of published ports (pid %d): %w", h.PID, err)
	}
	defer unix.Close(pfd)
	// The pidfd names one process for good: check it is the holder.
	if start, err := procStart(h.PID); err != nil || start != h.Start {
		return nil
	}
	if err := unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stop the holder of published ports (pid %d): %w", h.PID, err)
	}
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n, err := unix.Poll(fds, 100)
		if n > 0 {
			return nil
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("wait for the holder of published ports (pid %d): %w", h.PID, err)
		}
	}
	return fmt.Errorf("the holder of published ports (pid %d) did not end within 5s", h.PID)
}

// sweepHolders kills the holders started for this state directory that
// are not in keep (by PID), and returns what it removed. Call with the
// lock held: no holder is being started meanwhile.
func (n *Network) sweepHolders(keep map[int]bool) []string {
	var removed []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || keep[pid] {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if (len(args) != 3 && len(args) != 4) || args[2] != n.cfg.StateDir || !strings.HasPrefix(filepath.Base(args[0]), helperbin.Hold) {
			continue
		}
		start, err := procStart(pid)
		if err != nil {
			continue
		}
		if err := stopHolder(&holder{PID: pid, Start: start}); err != nil {
			n.log.Warn("could not stop a port holder no lease records", "pid", pid, "err", err)
			continue
		}
		removed = append(removed, "port holder "+e.Name())
	}
	return removed
}
