package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"github.com/moby/sys/user"
	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/isolate"
)

// AttachOptions describe an interactive process started in a running
// sandbox, with a terminal when Tty is set.
type AttachOptions struct {
	Args []string
	Env  []string // added to the sandbox's environment
	Cwd  string   // default: the sandbox's working directory, or /
	User string   // "name", "uid" or "uid:gid"; default: the sandbox's user
	Tty  bool
	// Stdin is copied to the process until EOF (nil: no input).
	Stdin          io.Reader
	Stdout, Stderr io.Writer // with Tty, all output goes to Stdout
	// Size is the initial terminal size (columns, rows); Resize carries
	// later sizes.
	Size   [2]uint16
	Resize <-chan [2]uint16
}

// Attach runs an interactive process in a running sandbox and returns its
// exit code (128+N when killed by signal N). The process joins the
// sandbox's namespaces, cgroups, seccomp filter and capability set, the way
// `docker exec` does; with Tty it gets a terminal of its own whose size
// follows Resize. Cancelling ctx kills the process.
//
// Non-interactive commands go through the executor instead (Exec).
func (m *Manager) Attach(ctx context.Context, ref string, o AttachOptions) (int, error) {
	if len(o.Args) == 0 {
		return 0, fmt.Errorf("%w: no command given", ErrInvalid)
	}
	sb, err := m.Get(ctx, ref)
	if err != nil {
		return 0, err
	}
	if sb.Status == StatusStopped {
		return 0, stoppedError(sb)
	}
	if sb.Status != StatusRunning {
		return 0, fmt.Errorf("%w: sandbox %s is %s", ErrState, sb.ShortID(), sb.Status)
	}
	if err := isolate.CheckInit(); err != nil {
		return 0, err
	}
	lc, err := libcontainer.Load(m.containerRoot(), sb.ID)
	if err != nil {
		return 0, fmt.Errorf("sandbox %s has no container: %w", sb.ShortID(), err)
	}
	spec := sb.Options.User
	cwd := o.Cwd
	if cwd == "" {
		cwd = sb.Options.Workdir
	}
	env := sb.Options.Env
	if sb.Image != nil {
		env = mergeEnv(sb.Image.Env, env)
		if spec == "" {
			spec = sb.Image.User
		}
		if cwd == "" {
			cwd = sb.Image.Workdir
		}
	}
	if o.User != "" {
		spec = o.User
	}
	if cwd == "" {
		cwd = "/"
	}
	u, err := lookupUser(sb.RootPath, spec)
	if err != nil {
		return 0, err
	}
	env = mergeEnv(env, o.Env)
	if u.Home != "" {
		env = mergeEnv([]string{"HOME=" + u.Home}, env)
	}
	hostname := sb.Options.Hostname
	if hostname == "" {
		hostname = sb.ShortID()
	}
	p := &libcontainer.Process{
		Args: o.Args,
		Env:  processEnv(env, hostname, o.Tty, uint32(u.Uid)),
		Cwd:  cwd,
		UID:  u.Uid,
		GID:  u.Gid,
		Init: false,
	}
	p.AdditionalGroups = u.Sgids
	var consoleParent *os.File
	if o.Tty {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("console socket: %w", err)
		}
		consoleParent = os.NewFile(uintptr(fds[0]), "console-parent")
		child := os.NewFile(uintptr(fds[1]), "console-child")
		defer consoleParent.Close()
		defer child.Close()
		p.ConsoleSocket = child
		p.ConsoleWidth, p.ConsoleHeight = o.Size[0], o.Size[1]
	} else {
		p.Stdin, p.Stdout, p.Stderr = o.Stdin, o.Stdout, o.Stderr
	}
	// The process is a grandchild (libcontainer's setns helper forks it);
	// only a subreaper can wait for it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("become a subreaper: %w", err)
	}
	if err := lc.Run(p); err != nil {
		return 0, fmt.Errorf("start process in sandbox %s: %w", sb.ShortID(), err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = p.Signal(unix.SIGKILL)
		case <-done:
		}
	}()
	var copies sync.WaitGroup
	if o.Tty {
		master, err := receiveFile(consoleParent)
		if err != nil {
			_ = p.Signal(unix.SIGKILL)
			_, _ = p.Wait()
			return 0, fmt.Errorf("receive terminal of the process: %w", err)
		}
		defer master.Close()
		copies.Add(1)
		go func() {
			defer copies.Done()
			_, _ = io.Copy(o.Stdout, master) // ends with EIO when the process exits
		}()
		if o.Stdin != nil {
			go func() { _, _ = io.Copy(master, o.Stdin) }()
		}
		if o.Resize != nil {
			go func() {
				for {
					select {
					case sz, ok := <-o.Resize:
						if !ok {
							return
						}
						_ = unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: sz[0], Row: sz[1]})
					case <-done:
						return
					}
				}
			}()
		}
	}
	ps, err := p.Wait()
	copies.Wait()
	if ps == nil {
		return 0, fmt.Errorf("wait for process in sandbox %s: %w", sb.ShortID(), err)
	}
	// os.ProcessState carries a syscall.WaitStatus (not x/sys/unix's).
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ps.ExitCode(), nil
}

// lookupUser resolves a user spec ("name", "uid", "uid:gid", "name:group")
// against the sandbox's /etc/passwd and /etc/group, opened inside the root
// so that symlinks planted by the sandbox cannot point outside it.
func lookupUser(root, spec string) (*user.ExecUser, error) {
	defaults := &user.ExecUser{Uid: 0, Gid: 0, Home: "/"}
	if spec == "" {
		spec = "0:0"
	}
	passwd, _ := openInRoot(root, "/etc/passwd")
	group, _ := openInRoot(root, "/etc/group")
	var pr, gr io.Reader
	if passwd != nil {
		defer passwd.Close()
		pr = io.LimitReader(passwd, 4<<20)
	}
	if group != nil {
		defer group.Close()
		gr = io.LimitReader(group, 4<<20)
	}
	u, err := user.GetExecUser(spec, defaults, pr, gr)
	if err != nil {
		return nil, fmt.Errorf("%w: user %q: %w", ErrInvalid, spec, err)
	}
	if u.Uid == 0 && u.Home == "/" {
		u.Home = "/root"
	}
	return u, nil
}

// openInRoot opens path for reading, resolved inside root.
func openInRoot(root, path string) (*os.File, error) {
	h, err := pathrs.OpenInRoot(root, path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return pathrs.Reopen(h, unix.O_RDONLY|unix.O_CLOEXEC)
}

// receiveFile receives one file descriptor sent with SCM_RIGHTS on sock.
func receiveFile(sock *os.File) (*os.File, error) {
	buf := make([]byte, 256)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, 0)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, errors.New("expected one control message with a file descriptor")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, errors.New("expected exactly one file descriptor")
	}
	return os.NewFile(uintptr(fds[0]), string(buf[:n])), nil
}
