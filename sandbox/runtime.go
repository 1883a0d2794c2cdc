package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/internal/helperbin"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
)

// Paths inside a sandbox's runtime directory, and where the socket
// directory appears inside the sandbox.
const (
	rootfsDir     = "rootfs"         // rootfs.Prepare's directory
	socketDir     = "sock"           // holds the executor socket
	socketName    = "executor.sock"  // the executor's listening socket
	executorLog   = "executor.log"   // stdout and stderr of PID 1
	SocketDirPath = "/.sbx/run"      // the socket directory inside the sandbox, read-only
	healthPath    = "/v1/health"     // the executor's readiness endpoint
	maxHealthBody = 64 << 10         // cap on the executor's health reply
	killWait      = 10 * time.Second // how long to wait for a killed PID 1 to go
)

// ImageSource is the image cache as the Manager uses it: resolving
// references to unpacked layers, and storing a sandbox's writable layer as a
// new image. NewImageSource adapts the image cache to it.
type ImageSource interface {
	// Resolve returns the image ref, pulling it if the policy allows.
	Resolve(ctx context.Context, ref string) (*ResolvedImage, error)
	// Commit stores layer (an uncompressed tar in OCI form: whiteouts as
	// .wh. files) on top of the image base (a digest) as a new image
	// called name.
	Commit(ctx context.Context, base, name string, layer io.Reader) (*ResolvedImage, error)
}

// ResolvedImage is an image ready to be mounted.
type ResolvedImage struct {
	Ref     string // familiar name
	Digest  string
	Layers  []string // unpacked layer directories, lowest first
	Env     []string
	Workdir string
	User    string
}

// startRuntime mounts the root, starts the container with the executor as
// PID 1 and waits until the executor answers.
func (m *Manager) startRuntime(ctx context.Context, sb *Sandbox, lowers []string) error {
	run := m.store.RunDir(sb.ID)
	m.crashPoint(stepNetwork)
	t0 := time.Now()
	hostname := sb.Options.Hostname
	if hostname == "" {
		hostname = sb.ShortID()
	}
	dirs := []string{"/.sbx"}
	if sb.Options.Workdir != "" {
		dirs = append(dirs, sb.Options.Workdir)
	}
	ro := rootfs.Options{
		DiskBytes:  sb.Options.Limits.DiskBytes,
		Hostname:   hostname,
		Hosts:      hostsFile(hostname),
		ResolvConf: resolvConf(netns.Mode(sb.Options.Network)),
		Dirs:       dirs,
	}
	if sb.Options.Network == string(netns.ModeBridge) {
		att, err := m.attachNetwork(ctx, sb, hostname)
		if err != nil {
			return err
		}
		ro.Hosts, ro.ResolvConf = att.Hosts, att.ResolvConf
		if sb.CreateTimings != nil {
			sb.CreateTimings.NetworkS = time.Since(t0).Seconds()
			sb.CreateTimings.FromPool = att.FromPool
		}
		t0 = time.Now()
	}
	m.crashPoint(stepRootfs)
	root, err := rootfs.Prepare(filepath.Join(run, rootfsDir), lowers, ro)
	if err != nil {
		return err
	}
	sb.RootPath = root.Path
	if sb.CreateTimings != nil {
		sb.CreateTimings.RootfsS = time.Since(t0).Seconds()
	}
	return m.startContainer(ctx, sb, hostname, root.Mounts)
}

// attachNetwork gives a bridged sandbox its namespace, address, rules and
// published ports. The network resource was recorded with the first write.
func (m *Manager) attachNetwork(ctx context.Context, sb *Sandbox, hostname string) (*netns.Attachment, error) {
	opts, err := sb.Options.networkOptions(hostname)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	n, err := m.network()
	if err != nil {
		return nil, err
	}
	att, err := n.Attach(ctx, sb.ID, opts)
	if err != nil {
		return nil, err
	}
	sb.Network = att
	return att, nil
}

// isolateNetwork is the network of the sandbox's container.
func isolateNetwork(sb *Sandbox) string {
	switch {
	case sb.Network != nil && sb.Network.NetNSPath != "":
		return sb.Network.NetNSPath
	case sb.Options.Network == string(netns.ModeHost):
		return isolate.NetworkHost
	}
	return isolate.NetworkNone
}

// network opens the bridge network state on first use.
func (m *Manager) network() (*netns.Network, error) {
	m.netOnce.Do(func() {
		m.net, m.netErr = netns.Open(netns.Config{
			StateDir:  filepath.Join(m.store.Root(), "network"),
			RunDir:    filepath.Join(m.store.RunRoot(), "netns"),
			HostNetNS: m.cfg.HostNetNS,
			Subnet:    m.cfg.Subnet,
			Logger:    m.log,
		})
	})
	return m.net, m.netErr
}

// lowers returns the read-only layers of the sandbox's root, resolving its
// image.
func (m *Manager) lowers(ctx context.Context, sb *Sandbox) ([]string, error) {
	if sb.Options.Rootfs != "" {
		fi, err := os.Stat(sb.Options.Rootfs)
		if err != nil {
			return nil, fmt.Errorf("%w: root directory: %w", ErrInvalid, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%w: root directory %s is not a directory", ErrInvalid, sb.Options.Rootfs)
		}
		return []string{sb.Options.Rootfs}, nil
	}
	if m.cfg.Images == nil {
		return nil, fmt.Errorf("%w: no image store configured; use --rootfs DIR", ErrInvalid)
	}
	img, err := m.cfg.Images.Resolve(ctx, sb.Options.Image)
	if err != nil {
		return nil, err
	}
	sb.Image = &ImageInfo{Ref: img.Ref, Digest: img.Digest, Layers: img.Layers, Env: img.Env, Workdir: img.Workdir, User: img.User}
	return img.Layers, nil
}

// startContainer starts the libcontainer container whose PID 1 is the
// executor, serving on a socket created here before the start, and waits
// for its first answer. No polling: the health request is queued on the
// listening socket until the executor accepts it, and fails at once if
// PID 1 dies (the last listening descriptor closes with it).
func (m *Manager) startContainer(ctx context.Context, sb *Sandbox, hostname string, extra []specs.Mount) error {
	run := m.store.RunDir(sb.ID)
	sockDir := filepath.Join(run, socketDir)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	sockPath := filepath.Join(sockDir, socketName)
	_ = os.Remove(sockPath) // from a previous start of this sandbox
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockPath, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen on executor socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	lnFile, err := ln.File()
	_ = ln.Close()
	if err != nil {
		return fmt.Errorf("executor socket: %w", err)
	}
	defer lnFile.Close()
	logf, err := os.OpenFile(filepath.Join(run, executorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("executor log: %w", err)
	}
	defer logf.Close()

	executorBin, err := m.executorBinary()
	if err != nil {
		return err
	}
	mounts := []specs.Mount{
		{Source: executorBin, Destination: isolate.ExecutorPath, Type: "bind", Options: []string{"bind", "ro", "nodev", "nosuid"}},
		{Source: sockDir, Destination: SocketDirPath, Type: "bind", Options: []string{"bind", "ro", "nodev", "nosuid", "noexec"}},
	}
	mounts = append(mounts, extra...)
	mounts = append(mounts, volumeMounts(sb.Options)...)
	env := sb.Options.Env
	if sb.Image != nil {
		env = mergeEnv(sb.Image.Env, sb.Options.Env)
	}
	// Commands get the image's and the caller's variables (and a PATH);
	// the executor sets HOME and USER for the user each command runs as.
	cmdEnv := withPath(env)
	env = processEnv(env, hostname, false, 0)
	spec := &isolate.Spec{
		ID:             sb.ID,
		Rootfs:         sb.RootPath,
		ReadonlyRootfs: sb.Options.ReadonlyRootfs,
		Args:           executorArgs(isolate.ExecutorPath, sb),
		Env:            env,
		Cwd:            "/",
		Hostname:       hostname,
		CapAdd:         sb.Options.CapAdd,
		CapDrop:        sb.Options.CapDrop,
		Seccomp:        sb.Options.Seccomp,
		Limits: cgroup.Limits{
			MemoryBytes: sb.Options.Limits.MemoryBytes,
			CPUs:        sb.Options.Limits.CPUs,
			Pids:        sb.Options.Limits.Pids,
		}.WithInitAllowance(),
		HelperSeccomp: true,
		Network:       isolateNetwork(sb),
		Mounts:        mounts,
	}
	// The commands' environment goes through a memfd, not the command
	// line, so that no host user can read it with ps.
	envFile, err := envMemfd(cmdEnv)
	if err != nil {
		return err
	}
	defer envFile.Close()
	m.crashPoint(stepStart)
	t0 := time.Now()
	ctr, err := isolate.Start(m.containerRoot(), spec, isolate.IO{
		Stdout:     logf,
		Stderr:     logf,
		ExtraFiles: []*os.File{lnFile, envFile},
	})
	if err != nil {
		return fmt.Errorf("%w%s", err, logTail(filepath.Join(run, executorLog)))
	}
	// Reap PID 1 when it exits while this process lives (a server); a CLI
	// process exits first and PID 1 is reparented.
	go func() { _, _ = ctr.Wait() }()
	_ = lnFile.Close()
	sb.Pid = ctr.Pid()
	sb.PidStart, _ = procStart(sb.Pid)
	sb.Socket = sockPath
	m.crashPoint(stepReady)
	t1 := time.Now()
	if err := m.waitReady(ctx, sockPath); err != nil {
		tail := logTail(filepath.Join(run, executorLog))
		return fmt.Errorf("%w: %w%s", ErrNotReady, err, tail)
	}
	if sb.CreateTimings != nil {
		sb.CreateTimings.StartS = t1.Sub(t0).Seconds()
		sb.CreateTimings.ReadyS = time.Since(t1).Seconds()
	}
	return nil
}

// waitReady sends one health request to the executor.
func (m *Manager) waitReady(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadyTimeout)
	defer cancel()
	client := unixHTTPClient(sock)
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox"+healthPath, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("executor health check: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxHealthBody))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("executor health check: HTTP %d: %.200s", resp.StatusCode, body)
	}
	var h struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("executor health check: bad reply: %w", err)
	}
	return nil
}

// unixHTTPClient is an HTTP client whose every connection goes to sock.
func unixHTTPClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression: true,
		MaxIdleConns:       1,
	}}
}

func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	if len(data) > 1000 {
		data = data[len(data)-1000:]
	}
	return "\nexecutor output:\n" + strings.TrimSpace(string(data))
}

// containerRoot is libcontainer's state root, shared with one-shot runs so
// that isolate's cache of compiled seccomp filters (next to it) is too.
func (m *Manager) containerRoot() string {
	return filepath.Join(m.store.RunRoot(), containersDir)
}

// executorBinary is the executor bind-mounted into sandboxes as their
// PID 1: Config.Executor, or the embedded sbx-executor, written under the
// root (not the tmpfs run root: a bind mount from tmpfs costs libcontainer's
// start several milliseconds here).
func (m *Manager) executorBinary() (string, error) {
	if m.cfg.Executor != "" {
		return m.cfg.Executor, nil
	}
	return helperbin.Install(filepath.Join(m.cfg.Root, helpersDir), helperbin.Executor)
}

// volumeMounts turns volumes and tmpfs mounts into OCI mounts.
func volumeMounts(o Options) []specs.Mount {
	var out []specs.Mount
	for _, v := range o.Volumes {
		opts := []string{"rbind", "nosuid", "nodev"}
		if v.ReadOnly {
			opts = append(opts, "ro")
		}
		out = append(out, specs.Mount{Source: v.HostPath, Destination: v.Path, Type: "bind", Options: opts})
	}
	for _, t := range o.Tmpfs {
		opts := []string{"nosuid", "nodev", "mode=1777"}
		if t.SizeBytes > 0 {
			opts = append(opts, "size="+strconv.FormatInt(t.SizeBytes, 10))
		}
		out = append(out, specs.Mount{Source: "tmpfs", Destination: t.Path, Type: "tmpfs", Options: opts})
	}
	return out
}

// withPath adds the default PATH to env if it has none.
func withPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append(append([]string{}, env...), "PATH="+isolate.DefaultPath)
}

// mergeEnv returns base with the entries of over replacing equal keys.
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(over))
	for _, list := range [][]string{base, over} {
		for _, e := range list {
			k, _, _ := strings.Cut(e, "=")
			if i, ok := idx[k]; ok {
				out[i] = e
				continue
			}
			idx[k] = len(out)
			out = append(out, e)
		}
	}
	return out
}

// releaseRunDir unmounts anything left below the runtime directory and
// removes it. Unmounting first matters: removing through a still-mounted
// volume would delete host files.
func (m *Manager) releaseRunDir(dir string) error {
	return rootfs.Cleanup(dir)
}

// releaseRootfs unmounts the sandbox's root and removes its directory.
func (m *Manager) releaseRootfs(dir string) error {
	return rootfs.Cleanup(dir)
}

// releaseContainer kills the container (thawing it if paused), destroys
// its libcontainer state and removes its cgroups. It copes with a
// container whose start was interrupted before libcontainer saved state.
func (m *Manager) releaseContainer(ctx context.Context, r Resource) error {
	var errs []error
	if ctr, err := isolate.Load(r.Path, r.ID); err == nil {
		if err := killAndWait(ctx, ctr); err != nil {
			errs = append(errs, err)
		}
		if err := ctr.Destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	if paths := cgroup.Leftovers()[r.ID]; len(paths) > 0 {
		if err := killCgroup(ctx, r.ID); err != nil {
			errs = append(errs, err)
		}
		if err := cgroup.RemovePaths(paths); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(r.Path, r.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killAndWait kills the container's PID 1 (its PID namespace goes with it)
// and waits until it is gone.
func killAndWait(ctx context.Context, ctr *isolate.Container) error {
	pid := ctr.Pid()
	if pid <= 0 || ctr.Status() == "stopped" {
		return nil
	}
	pidfd, perr := unix.PidfdOpen(pid, 0)
	if ctr.Status() == "paused" {
		_ = ctr.Resume()
	}
	if err := ctr.Kill(); err != nil {
		if perr == nil {
			_ = unix.Close(pidfd)
		}
		return err
	}
	if perr != nil {
		return nil // already gone
	}
	defer unix.Close(pidfd)
	return waitPidfd(ctx, pidfd, killWait)
}

// waitPidfd waits until the process behind pidfd exits, or for timeout.
func waitPidfd(ctx context.Context, pidfd int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return fmt.Errorf("process did not exit within %s", timeout)
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for process exit: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// executorArgs is the command line of a sandbox's PID 1: the executor with
// the sandbox's defaults for commands.
func executorArgs(executor string, sb *Sandbox) []string {
	args := []string{executor, "executor", "--listen-fd", "3", "--env-fd", "4"}
	workdir := sb.Options.Workdir
	user := sb.Options.User
	if sb.Image != nil {
		if workdir == "" {
			workdir = sb.Image.Workdir
		}
		if user == "" {
			user = sb.Image.User
		}
	}
	if workdir != "" {
		args = append(args, "--workdir", workdir)
	}
	if user != "" {
		args = append(args, "--user", user)
	}
	return args
}

// envMemfd returns a memfd holding env as NUL-separated entries, read from
// the start by the executor (--env-fd).
func envMemfd(env []string) (*os.File, error) {
	fd, err := unix.MemfdCreate("sbx-env", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for the executor's environment: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sbx-env")
	if _, err := f.WriteString(strings.Join(env, "\x00")); err != nil {
		f.Close()
		return nil, fmt.Errorf("write the executor's environment: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
