package runc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/isolate"
)

// maxJSON caps what is read of config.json, a process file or a resources
// document.
const maxJSON = 16 << 20

func specVersion() string { return specs.Version }

// readJSON decodes at most maxJSON bytes of r into v.
func readJSON(r io.Reader, what string, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, maxJSON+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	if len(data) > maxJSON {
		return fmt.Errorf("%s is larger than %d bytes", what, maxJSON)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// readJSONFile decodes the file at path into v.
func readJSONFile(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return readJSON(f, path, v)
}

// load loads the container named by the first argument.
func load(g *globals, id string) (*isolate.Container, error) {
	return isolate.Load(g.root, id)
}

// validateProcess checks a process spec as runc does.
func validateProcess(p *specs.Process) error {
	switch {
	case p == nil:
		return errors.New("process property must not be empty")
	case p.Cwd == "":
		return errors.New("process.cwd must not be empty")
	case !filepath.IsAbs(p.Cwd):
		return errors.New("process.cwd must be an absolute path")
	case len(p.Args) == 0:
		return errors.New("args must not be empty")
	}
	return nil
}

// consoleSocket connects to the socket the caller receives a terminal's
// master on; it returns nil without a path.
func consoleSocket(path string) (*os.File, func(), error) {
	if path == "" {
		return nil, func() {}, nil
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to console socket: %w", err)
	}
	f, err := conn.(*net.UnixConn).File()
	conn.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("console socket: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// preserved returns the n files after stdio (fd 3, 4, ...) to pass on.
func preserved(n int) ([]*os.File, error) {
	var files []*os.File
	for fd := 3; fd < 3+n; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil, fmt.Errorf("unable to stat preserved-fd %d (of %d): %w", fd-3, n, err)
		}
		files = append(files, os.NewFile(uintptr(fd), "preserved-fd-"+strconv.Itoa(fd)))
	}
	return files, nil
}

// writePidFile writes pid to path atomically (a temporary file renamed).
func writePidFile(path string, pid int) error {
	if path == "" {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// absPath makes a flag's path absolute (the caller's working directory
// changes to the bundle).
func absPath(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return filepath.Abs(p)
}

// cmdCreate creates a container from a bundle and leaves its init waiting
// for start.
func cmdCreate(g *globals, args []string) (retErr error) {
	fs := newFlags("create")
	bundle := fs.String("bundle", "", "")
	fs.StringVar(bundle, "b", "", "")
	pidFile := fs.String("pid-file", "", "")
	consolePath := fs.String("console-socket", "", "")
	noPivot := fs.Bool("no-pivot", false, "")
	noKeyring := fs.Bool("no-new-keyring", false, "")
	preserveFDs := fs.Int("preserve-fds", 0, "")
	pidfd := fs.String("pidfd-socket", "", "")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	if *pidfd != "" {
		return errors.New("--pidfd-socket is not supported by sbx-runc")
	}
	id := fs.Arg(0)
	var err error
	if *pidFile, err = absPath(*pidFile); err != nil {
		return err
	}
	if *consolePath, err = absPath(*consolePath); err != nil {
		return err
	}
	if *bundle != "" {
		if err := os.Chdir(*bundle); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	var spec specs.Spec
	if err := readJSONFile("config.json", &spec); err != nil {
		return fmt.Errorf("load config.json of the bundle: %w", err)
	}
	if err := validateProcess(spec.Process); err != nil {
		return err
	}
	if spec.Process.Terminal && *consolePath == "" {
		return errors.New("cannot allocate tty if runc will detach without setting console socket")
	}
	if err := isolate.Harden(&spec); err != nil {
		return err
	}
	extra, err := preserved(*preserveFDs)
	if err != nil {
		return err
	}
	c, err := isolate.CreateOCI(g.root, id, &spec, isolate.OCIOptions{NoPivotRoot: *noPivot, NoNewKeyring: *noKeyring})
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			_ = c.Destroy()
		}
	}()
	sock, closeSock, err := consoleSocket(*consolePath)
	if err != nil {
		return err
	}
	defer closeSock()
	pid, err := c.StartOCI(spec.Process, isolate.OCIIO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ConsoleSocket: sock, ExtraFiles: extra})
	if err != nil {
		return err
	}
	if err := writePidFile(*pidFile, pid); err != nil {
		_ = c.SignalOCI(unix.SIGKILL)
		return err
	}
	return nil
}

// cmdStart lets a created container's process run.
func cmdStart(g *globals, args []string) error {
	fs := newFlags("start")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	switch st := c.Status(); st {
	case "created":
		return c.Release()
	case "stopped":
		return errors.New("cannot start a container that has stopped")
	case "running":
		return errors.New("cannot start an already running container")
	default:
		return fmt.Errorf("cannot start a container in the %s state", st)
	}
}

// stateJSON is runc's state output.
type stateJSON struct {
	Version     string            `json:"ociVersion"`
	ID          string            `json:"id"`
	Pid         int               `json:"pid"`
	Status      string            `json:"status"`
	Bundle      string            `json:"bundle"`
	Rootfs      string            `json:"rootfs"`
	Created     time.Time         `json:"created"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Owner       string            `json:"owner"`
}

// cmdState prints a container's state as JSON.
func cmdState(g *globals, args []string) error {
	fs := newFlags("state")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	st, err := c.State()
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(stateJSON{Version: st.Version, ID: st.ID, Pid: st.Pid, Status: st.Status,
		Bundle: st.Bundle, Rootfs: st.Rootfs, Created: st.Created, Annotations: st.Annotations}, "", "  ")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(data)
	return err
}

// listFlag collects a repeated string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// cmdExec runs one more process in a running container; its errors exit
// with 255 and start "exec failed:", as runc's.
func cmdExec(g *globals, args []string) error {
	err := execProcess(g, args)
	var st exitStatus
	if err != nil && !errors.As(err, &st) {
		return codedError{255, fmt.Errorf("exec failed: %w", err)}
	}
	return err
}

// execProcess is exec.
func execProcess(g *globals, args []string) error {
	fs := newFlags("exec")
	process := fs.String("process", "", "")
	fs.StringVar(process, "p", "", "")
	detach := fs.Bool("detach", false, "")
	fs.BoolVar(detach, "d", false, "")
	pidFile := fs.String("pid-file", "", "")
	consolePath := fs.String("console-socket", "", "")
	tty := fs.Bool("tty", false, "")
	fs.BoolVar(tty, "t", false, "")
	cwd := fs.String("cwd", "", "")
	user := fs.String("user", "", "")
	fs.StringVar(user, "u", "", "")
	var env, caps listFlag
	fs.Var(&env, "env", "")
	fs.Var(&env, "e", "")
	fs.Var(&caps, "cap", "")
	fs.Var(&caps, "c", "")
	preserveFDs := fs.Int("preserve-fds", 0, "")
	fs.Bool("no-new-privs", false, "")
	ignorePaused := fs.Bool("ignore-paused", false, "")
	if err := parse(fs, args, 1, -1); err != nil {
		return err
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	switch c.Status() {
	case "stopped":
		return errors.New("cannot exec in a stopped container")
	case "paused":
		if !*ignorePaused {
			return errors.New("cannot exec in a paused container (use --ignore-paused to override)")
		}
	}
	var p specs.Process
	if *process != "" {
		if err := readJSONFile(*process, &p); err != nil {
			return fmt.Errorf("load process file: %w", err)
		}
	} else {
		if fs.NArg() < 2 {
			return errors.New("exec: give the command after the container id, or --process")
		}
		st, err := c.State()
		if err != nil {
			return err
		}
		var spec specs.Spec
		if err := readJSONFile(filepath.Join(st.Bundle, "config.json"), &spec); err != nil {
			return fmt.Errorf("load config.json of the bundle: %w", err)
		}
		if spec.Process == nil {
			return errors.New("config.json of the bundle has no process")
		}
		p = *spec.Process
		p.Args = fs.Args()[1:]
		p.Terminal = *tty
		p.Env = append(p.Env, env...)
		if *cwd != "" {
			p.Cwd = *cwd
		}
		if *user != "" {
			u, gid, hasGID := strings.Cut(*user, ":")
			uid, err := strconv.ParseUint(u, 10, 32)
			if err != nil {
				return fmt.Errorf("parse --user %q: want UID[:GID]", *user)
			}
			p.User = specs.User{UID: uint32(uid)}
			if hasGID {
				g, err := strconv.ParseUint(gid, 10, 32)
				if err != nil {
					return fmt.Errorf("parse --user %q: want UID[:GID]", *user)
				}
				p.User.GID = uint32(g)
			}
		}
		if len(caps) > 0 && p.Capabilities != nil {
			for _, c := range caps {
				p.Capabilities.Bounding = append(p.Capabilities.Bounding, c)
				p.Capabilities.Effective = append(p.Capabilities.Effective, c)
				p.Capabilities.Permitted = append(p.Capabilities.Permitted, c)
			}
		}
	}
	if err := validateProcess(&p); err != nil {
		return err
	}
	if p.Terminal && (!*detach || *consolePath == "") {
		return errors.New("sbx-runc exec with a terminal needs --detach and --console-socket")
	}
	extra, err := preserved(*preserveFDs)
	if err != nil {
		return err
	}
	sock, closeSock, err := consoleSocket(*consolePath)
	if err != nil {
		return err
	}
	defer closeSock()
	if !*detach {
		// The process is not this program's child (libcontainer forks it
		// in the container's namespaces): become its reaper to wait for it.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("become a subreaper: %w", err)
		}
	}
	pid, err := c.ExecOCI(&p, isolate.OCIIO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ConsoleSocket: sock, ExtraFiles: extra})
	if err != nil {
		return err
	}
	if err := writePidFile(*pidFile, pid); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		return err
	}
	if *detach {
		return nil
	}
	return waitForeground(pid)
}

// waitForeground forwards signals to pid until it exits and returns its
// status as an exitStatus (128+N for a signal, as runc).
func waitForeground(pid int) error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			_ = unix.Kill(pid, s.(unix.Signal))
		}
	}()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for process %d: %w", pid, err)
		}
		if got != pid {
			continue // another orphan reparented to us
		}
		if ws.Signaled() {
			return exitStatus(128 + int(ws.Signal()))
		}
		return exitStatus(ws.ExitStatus())
	}
}

// parseSignal parses a signal given as a number or a name (KILL, SIGKILL).
func parseSignal(s string) (unix.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return unix.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return -1, fmt.Errorf("unknown signal %q", s)
}

// cmdKill sends a signal (default SIGTERM) to a container's init.
func cmdKill(g *globals, args []string) error {
	fs := newFlags("kill")
	all := fs.Bool("all", false, "")
	fs.BoolVar(all, "a", false, "")
	if err := parse(fs, args, 1, 2); err != nil {
		return err
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	name := fs.Arg(1)
	if name == "" {
		name = "SIGTERM"
	}
	sig, err := parseSignal(name)
	if err != nil {
		return err
	}
	err = c.SignalOCI(sig)
	if errors.Is(err, isolate.ErrNotRunning) && *all {
		return nil
	}
	return err
}

// cmdDelete removes a stopped (or, with --force, any) container.
func cmdDelete(g *globals, args []string) error {
	fs := newFlags("delete")
	force := fs.Bool("force", false, "")
	fs.BoolVar(force, "f", false, "")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	id := fs.Arg(0)
	c, err := load(g, id)
	if err != nil {
		if errors.Is(err, isolate.ErrNotExist) {
			// An aborted create can leave a directory without state.
			if filepath.Base(id) == id && id != "." && id != ".." {
				_ = os.RemoveAll(filepath.Join(g.root, id))
			}
			if *force {
				return nil
			}
		}
		return err
	}
	if *force {
		return killAndDestroy(c)
	}
	switch st := c.Status(); st {
	case "stopped":
		return c.Destroy()
	case "created":
		return killAndDestroy(c)
	default:
		return fmt.Errorf("cannot delete container %s that is not stopped: %s", id, st)
	}
}

// killAndDestroy kills every process of the container, waits up to ten
// seconds for its init to go, then removes the container.
func killAndDestroy(c *isolate.Container) error {
	_ = c.SignalOCI(unix.SIGKILL)
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		if err := c.SignalOCI(0); err != nil {
			return c.Destroy()
		}
	}
	for range 99 {
		time.Sleep(100 * time.Millisecond)
		if err := c.SignalOCI(0); err != nil {
			return c.Destroy()
		}
	}
	return errors.New("container init still running")
}

// cmdPause freezes every process of a container.
func cmdPause(g *globals, args []string) error {
	fs := newFlags("pause")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	return c.Pause()
}

// cmdResume thaws a paused container.
func cmdResume(g *globals, args []string) error {
	fs := newFlags("resume")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	return c.Resume()
}

// cmdUpdate applies new resources (OCI LinuxResources JSON) to a container.
func cmdUpdate(g *globals, args []string) error {
	fs := newFlags("update")
	res := fs.String("resources", "", "")
	fs.StringVar(res, "r", "", "")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	if *res == "" {
		return errors.New("update: only --resources FILE (or - for stdin) is supported by sbx-runc")
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	var r specs.LinuxResources
	if *res == "-" {
		err = readJSON(os.Stdin, "resources", &r)
	} else {
		err = readJSONFile(*res, &r)
	}
	if err != nil {
		return err
	}
	return c.Update(&r)
}

// cmdPs lists the host PIDs of a container's processes.
func cmdPs(g *globals, args []string) error {
	fs := newFlags("ps")
	format := fs.String("format", "table", "")
	fs.StringVar(format, "f", "table", "")
	if err := parse(fs, args, 1, 1); err != nil {
		return err
	}
	if *format != "json" && *format != "table" {
		return errors.New("invalid format option")
	}
	c, err := load(g, fs.Arg(0))
	if err != nil {
		return err
	}
	pids, err := c.Processes()
	if err != nil {
		return err
	}
	if *format == "json" {
		return json.NewEncoder(os.Stdout).Encode(pids)
	}
	fmt.Println("PID")
	for _, p := range pids {
		fmt.Println(p)
	}
	return nil
}

// cmdFeatures prints what sbx-runc supports in the OCI features format.
func cmdFeatures(_ *globals, args []string) error {
	fs := newFlags("features")
	if err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "    ")
	return enc.Encode(isolate.Features())
}
