package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
)

// Paths inside a sandbox's runtime directory.
const (
	rootfsDir     = "rootfs"         // the root's directory (provision)
	cgroupViewDir = "cgroup"         // the cgroup view the container binds (isolate.MountCgroupView)
	devDir        = "dev"            // a one-shot run's /dev (isolate.MountDev)
	socketDir     = "sock"           // holds the executor socket
	socketName    = "executor.sock"  // the executor's listening socket
	executorLog   = "executor.log"   // stdout and stderr of PID 1
	healthPath    = "/v1/health"     // the executor's readiness endpoint
	maxHealthBody = 64 << 10         // cap on the executor's health reply
	killWait      = 10 * time.Second // how long to wait for a killed PID 1 to go
	containersDir = "containers"     // libcontainer's state root, below RunRoot
	mountNSDir    = "mntns"          // sandboxes' mount namespaces, below RunRoot
)

// startExecutor starts the container whose PID 1 is the executor,
// serving on a socket created here before the start, and waits for its
// first answer. No polling: the health request is queued on the listening
// socket until the executor accepts it, and fails at once if PID 1 dies
// (the last listening descriptor closes with it). extra are the root's
// own mounts (host mode).
//
// A sandbox in a private user namespace joins uns (made by provision), or
// a new namespace on its leased range when uns is nil (Start).
//
// Its spec never sets ParentDeathSignal (only one-shot runs do): PID 1's
// parent is the locked thread that started it in the sandbox's mount
// namespace (rootfs.Namespaces), and that thread ends when the create or
// start returns, which would deliver the signal at once.
func (h *Host) startExecutor(ctx context.Context, sb *sbx.Sandbox, extra []specs.Mount, uns *usernsHandle) error {
	run := h.store.RunDir(sb.ID)
	// The socket stays on the host side: the executor serves on the
	// listening descriptor it inherits (--listen-fd), so the sandbox never
	// sees the socket's directory, and no mount is made for it (every
	// mount on the host is copied into each new sandbox's mount namespace,
	// so per-sandbox host mounts make every create slower).
	sockDir := filepath.Join(run, socketDir)
	if err := os.Mkdir(sockDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
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
	out, err := openExecutorOutput(run)
	if err != nil {
		return fmt.Errorf("executor log: %w", err)
	}
	defer out.close()

	spec, done, err := h.executorSpec(sb, extra, uns)
	if err != nil {
		return err
	}
	defer done()
	if spec.CgroupView, err = h.mountCgroupView(sb.ID); err != nil {
		return err
	}
	// The commands' environment goes through a memfd, not the command
	// line, so that no host user can read it with ps.
	envFile, err := envMemfd(withPath(executorEnv(sb)))
	if err != nil {
		return err
	}
	defer envFile.Close()
	files := []*os.File{lnFile, envFile}
	if sb.Pool != "" {
		f, err := claimDefaultsMemfd()
		if err != nil {
			return err
		}
		defer f.Close()
		files = append(files, f)
	}
	h.crashPoint(stepStart)
	t0 := time.Now()
	ctr, err := isolate.Start(h.containerRoot(), spec, isolate.IO{
		Stdout:     out.W,
		Stderr:     out.W,
		ExtraFiles: files,
	})
	if err != nil {
		out.close()
		return fmt.Errorf("%w%s", err, logTail(filepath.Join(run, executorLog)))
	}
	// Reap PID 1 when it exits while this process lives (a server); a CLI
	// process exits first and PID 1 is reparented.
	go func() { _, _ = ctr.Wait() }()
	_ = lnFile.Close()
	sb.Pid = ctr.Pid()
	sb.PidStart, _ = procStart(sb.Pid)
	sb.Socket = sockPath
	h.crashPoint(stepReady)
	t1 := time.Now()
	if err := h.waitReady(ctx, sockPath); err != nil {
		out.close()
		tail := logTail(filepath.Join(run, executorLog))
		return fmt.Errorf("%w: %w%s", sbx.ErrNotReady, err, tail)
	}
	if sb.CreateTimings != nil {
		sb.CreateTimings.StartS = t1.Sub(t0).Seconds()
		sb.CreateTimings.ReadyS = time.Since(t1).Seconds()
	}
	return nil
}

// mountCgroupView (re)mounts sandbox id's cgroup view in its runtime
// directory, in its own mount namespace (the calling thread's), for
// Spec.CgroupView: a view left by an earlier start shows cgroups that went
// with that start's container. It returns "" for a sandbox without a
// mount namespace of its own (made by an older sbx: its container gets a
// bind per hierarchy rather than leaving mounts on the host) and where
// the view is one bind anyway (pure v2). The view goes with the mount
// namespace; its cgroups with the container.
func (h *Host) mountCgroupView(id string) (string, error) {
	if !h.mountNS.Has(id) {
		return "", nil
	}
	dir := filepath.Join(h.store.RunDir(id), cgroupViewDir)
	if err := isolate.UnmountCgroupView(dir); err != nil {
		return "", err
	}
	made, err := isolate.MountCgroupView(dir, id)
	if !made {
		return "", err
	}
	return dir, nil
}

// executorEnv is the environment of a sandbox's commands: the image's
// and the caller's variables (withPath adds a PATH; the executor sets HOME
// and USER for the user each command runs as).
func executorEnv(sb *sbx.Sandbox) []string {
	if sb.Image != nil {
		return sbx.MergeEnv(sb.Image.Env, sb.Options.Env)
	}
	return sb.Options.Env
}

// executorSpec is the container of a sandbox whose PID 1 is the executor:
// what a start runs and a restore recreates. done releases what it holds
// (a user namespace it made).
func (h *Host) executorSpec(sb *sbx.Sandbox, extra []specs.Mount, uns *usernsHandle) (*isolate.Spec, func(), error) {
	executor, err := h.executorBinary()
	if err != nil {
		return nil, nil, err
	}
	binds := []specs.Mount{readOnlyBind(executor, isolate.ExecutorPath)}
	p := &provisioned{id: sb.ID, hostname: hostname(sb), opts: &sb.Options,
		root: &rootfs.Root{Path: sb.RootPath, Mounts: extra}, net: attachmentOf(sb), uns: uns}
	done := func() {}
	if sb.Options.UserNS == sbx.UserNSPrivate && uns == nil {
		if p.uns, err = newUserNS(h.cfg.UserNSDir, sandboxOwner(h.store.Root(), sb.ID)); err != nil {
			return nil, nil, err
		}
		done = p.closeUserNS
	}
	env := executorProcessEnv(processEnv(executorEnv(sb), p.hostname, false, "/root"))
	return containerSpec(p, executorArgs(isolate.ExecutorPath, sb), env, "/", rootfs.User{Home: "/root"}, binds), done, nil
}

// executorProcessEnv is PID 1's own environment: env with GOMAXPROCS=1 in
// place of any value the sandbox's variables give it. The executor runs
// on one P; set before its Go runtime starts, the runtime makes only that
// one, where a runtime.GOMAXPROCS(1) call after the start would stop the
// world and the runtime would have started threads for a second P in the
// meantime. Commands are unaffected: their environment comes from
// --env-fd (executorEnv), not from PID 1's.
func executorProcessEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if !strings.HasPrefix(e, "GOMAXPROCS=") {
			out = append(out, e)
		}
	}
	return append(out, "GOMAXPROCS=1")
}

// attachmentOf is the network a recorded sandbox's container joins.
func attachmentOf(sb *sbx.Sandbox) *netns.Attachment {
	a := &netns.Attachment{Mode: netns.Mode(sb.Options.Network)}
	if sb.Network != nil {
		a.NetNSPath = sb.Network.NetNSPath
	}
	return a
}

// waitReady sends one health request to the executor.
func (h *Host) waitReady(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ReadyTimeout)
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
	var hl struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &hl); err != nil {
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

// withPath adds the default PATH to env if it has none.
func withPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append(append([]string{}, env...), "PATH="+sbx.DefaultPath)
}

// executorArgs is the command line of a sandbox's PID 1: the executor with
// the sandbox's defaults for commands.
func executorArgs(executor string, sb *sbx.Sandbox) []string {
	args := []string{executor, "executor", "--listen-fd", "3", "--env-fd", "4"}
	if sb.Pool != "" {
		args = append(args, "--claim-defaults-fd", strconv.Itoa(claimDefaultsFD))
	}
	workdir := sb.Options.Workdir
	if sb.Image != nil && workdir == "" {
		workdir = sb.Image.Workdir
	}
	user := defaultUser(sb)
	if workdir != "" {
		args = append(args, "--workdir", workdir)
	}
	if user != "" {
		args = append(args, "--user", user)
	}
	return args
}

// defaultUser is the user of a sandbox's commands unless they name one:
// the caller's, else the image's ("" for root).
func defaultUser(sb *sbx.Sandbox) string {
	if sb.Options.User == "" && sb.Image != nil {
		return sb.Image.User
	}
	return sb.Options.User
}

// checkDefaultUser looks the default user up in the sandbox's mounted
// root before its executor starts, so that a user the image lacks is a
// clear sbx.ErrInvalid naming the user and the image, not an executor
// that exits before it answers.
func checkDefaultUser(sb *sbx.Sandbox, root string) error {
	user := defaultUser(sb)
	if user == "" {
		return nil
	}
	if _, err := rootfs.LookupUser(root, user); err != nil {
		what := "the host" // host mode
		switch {
		case sb.Options.Rootfs != "":
			what = "rootfs " + sb.Options.Rootfs
		case sb.Options.Image != "":
			what = "image " + sb.Options.Image
		}
		return fmt.Errorf("%w: user %q is not a user of %s (%w); give a user its /etc/passwd has, or a numeric uid:gid", sbx.ErrInvalid, user, what, err)
	}
	return nil
}

// claimDefaultsFD is the descriptor of a pool member's executor for the
// defaults of its claimant (the third of its extra files, after the
// listening socket and the environment): an empty memfd, which a claim
// fills (writeClaimDefaults).
const claimDefaultsFD = 5

// claimDefaultsMemfd returns the empty memfd of a pool member's executor
// for its claimant's defaults.
func claimDefaultsMemfd() (*os.File, error) {
	fd, err := unix.MemfdCreate("sbx-claim-defaults", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for the executor's claim defaults: %w", err)
	}
	return os.NewFile(uintptr(fd), "sbx-claim-defaults"), nil
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
