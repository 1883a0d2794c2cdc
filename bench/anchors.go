package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/seccomp"
)

// AnchorNames are the runtimes sbx can be compared with.
var AnchorNames = []string{"runc", "crun", "bwrap", "docker", "podman"}

// NewAnchor returns the subject that runs w's command with the named
// runtime; an unknown name gives a subject whose Setup fails.
func NewAnchor(name string, w Workload, c Compare) Subject {
	switch name {
	case "runc", "crun":
		return &ociCLI{name: name, w: w}
	case "bwrap":
		return &bwrapAnchor{w: w}
	case "docker":
		return &dockerAnchor{w: w, host: c.DockerHost, start: c.StartDockerd}
	case "podman":
		return &podmanAnchor{w: w}
	}
	return failed{name: name, err: fmt.Errorf("unknown runtime %q: choose from %s", name, strings.Join(AnchorNames, ", "))}
}

// failed is a subject that cannot be set up.
type failed struct {
	name string
	err  error
}

func (f failed) Name() string                         { return f.name }
func (f failed) Setup(context.Context) (Info, error)  { return Info{}, f.err }
func (f failed) Once(context.Context) (Sample, error) { return Sample{}, f.err }
func (f failed) Close() error                         { return nil }

// runID makes container names unique across iterations and processes.
var runID atomic.Int64

func nextID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), runID.Add(1))
}

// equivalentSpec is the isolation sbx gives a one-shot run, for anchors:
// same namespaces, Docker's capabilities, masked and read-only paths and
// seccomp profile, root read-only (sbx puts a tmpfs overlay on top).
func equivalentSpec(w Workload) *isolate.Spec {
	return &isolate.Spec{ID: "sbx-bench", Rootfs: w.Rootfs, ReadonlyRootfs: true, Args: w.Args,
		Env: []string{"PATH=" + isolate.DefaultPath}, Hostname: "sbx-bench", Seccomp: seccomp.Default}
}

// ociCLI runs an OCI bundle with runc or crun.
type ociCLI struct {
	name, bin string
	w         Workload
	bundle    string
	view      *v1View // crun on a hybrid host: its commands run in this namespace
}

// command returns the command that runs the runtime with args.
func (o *ociCLI) command(ctx context.Context, args ...string) *exec.Cmd {
	bin := o.bin
	if o.view != nil {
		bin, args = o.view.wrap(bin, args)
	}
	return exec.CommandContext(ctx, bin, args...)
}

func (o *ociCLI) Name() string { return o.name }

func (o *ociCLI) Setup(ctx context.Context) (Info, error) {
	info := Info{Command: o.name + " run --bundle DIR ID (bundle from isolate.OCISpec: same root, namespaces, capabilities, masked paths, seccomp)"}
	var err error
	if o.bin, err = lookPath(o.name, o.name); err != nil {
		return info, err
	}
	if out, err := runCmd(ctx, 10*time.Second, o.bin, "--version"); err == nil {
		info.Version = firstLine(out)
	}
	if o.name == "crun" && hybridWithControllers() {
		if o.view, err = newV1View(ctx); err != nil {
			return info, err
		}
		info.Note = "crun 1.8 refuses hybrid cgroup hosts: it runs through nsenter in a mount namespace without " +
			unifiedMount + " (the v1 hierarchies only); each figure includes nsenter's exec"
	}
	spec, err := isolate.OCISpec(equivalentSpec(o.w))
	if err != nil {
		return info, fmt.Errorf("build the OCI spec: %w", err)
	}
	spec.Linux.CgroupsPath = "" // the runtime's default: a cgroup per container
	// The bundle uses nothing newer than OCI 1.0.2; older runtimes (crun
	// 1.8) refuse newer version strings.
	spec.Version = "1.0.2"
	data, err := json.Marshal(spec)
	if err != nil {
		return info, err
	}
	if o.bundle, err = os.MkdirTemp("", "sbx-bench-"+o.name+"-"); err != nil {
		return info, err
	}
	return info, os.WriteFile(filepath.Join(o.bundle, "config.json"), data, 0o644)
}

func (o *ociCLI) Once(ctx context.Context) (Sample, error) {
	id := nextID("sbx-bench-" + o.name)
	cmd := o.command(ctx, "run", "--bundle", o.bundle, id)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		_ = o.command(context.Background(), "delete", "--force", id).Run()
		return Sample{}, fmt.Errorf("%s run: %w: %s", o.name, err, lastLines(string(out), 3))
	}
	return Sample{Value: Ms(d)}, nil
}

func (o *ociCLI) Close() error {
	err := o.view.Close()
	o.view = nil
	if o.bundle == "" {
		return err
	}
	return errors.Join(err, os.RemoveAll(o.bundle))
}

// bwrapAnchor runs the command with bubblewrap: the same namespaces,
// capabilities and compiled seccomp filter; bwrap has no cgroups and no
// masked /proc paths.
type bwrapAnchor struct {
	w        Workload
	bin      string
	dir      string
	progPath string
}

func (b *bwrapAnchor) Name() string { return "bwrap" }

func (b *bwrapAnchor) Setup(ctx context.Context) (Info, error) {
	info := Info{Command: "bwrap --unshare-{pid,ipc,uts,net,cgroup} --ro-bind DIR / --proc --dev --tmpfs /tmp --cap-drop ALL --cap-add <docker's> --seccomp FD",
		Note: "no cgroup and no masked /proc paths: bwrap has neither"}
	var err error
	if b.bin, err = lookPath("bwrap", "bubblewrap"); err != nil {
		return info, err
	}
	if out, err := runCmd(ctx, 10*time.Second, b.bin, "--version"); err == nil {
		info.Version = firstLine(out)
	}
	cfg, err := isolate.Config(equivalentSpec(b.w))
	if err != nil {
		return info, fmt.Errorf("build the seccomp filter: %w", err)
	}
	prog, err := seccomp.Compile(cfg.Seccomp)
	if err != nil {
		return info, fmt.Errorf("compile the seccomp filter: %w", err)
	}
	if b.dir, err = os.MkdirTemp("", "sbx-bench-bwrap-"); err != nil {
		return info, err
	}
	// Compile's output starts with an 8-byte header (magic and flags);
	// bwrap takes the bare BPF program.
	if len(prog) <= 8 {
		return info, fmt.Errorf("compiled seccomp filter of %d bytes is too short", len(prog))
	}
	b.progPath = filepath.Join(b.dir, "seccomp.bpf")
	return info, os.WriteFile(b.progPath, prog[8:], 0o600)
}

func (b *bwrapAnchor) Once(ctx context.Context) (Sample, error) {
	prog, err := os.Open(b.progPath)
	if err != nil {
		return Sample{}, err
	}
	defer prog.Close()
	args := []string{"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup",
		"--die-with-parent", "--new-session", "--hostname", "sbx-bench",
		"--ro-bind", b.w.Rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--clearenv", "--setenv", "PATH", isolate.DefaultPath, "--chdir", "/", "--cap-drop", "ALL"}
	for _, c := range isolate.DefaultCapabilities {
		args = append(args, "--cap-add", c)
	}
	args = append(args, "--seccomp", "3", "--")
	cmd := exec.CommandContext(ctx, b.bin, append(args, b.w.Args...)...)
	cmd.ExtraFiles = []*os.File{prog}
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return Sample{}, fmt.Errorf("bwrap: %w: %s", err, lastLines(string(out), 3))
	}
	return Sample{Value: Ms(d)}, nil
}

func (b *bwrapAnchor) Close() error {
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}

// podmanAnchor runs the command with podman on the same root directory
// (as an overlay, so the directory is not changed).
type podmanAnchor struct {
	w       Workload
	bin     string
	cgroups newCgroups
}

func (p *podmanAnchor) Name() string { return "podman" }

func (p *podmanAnchor) Setup(ctx context.Context) (Info, error) {
	info := Info{Command: "podman run --rm --network none --rootfs DIR:O " + strings.Join(p.w.Args, " ")}
	var err error
	if p.bin, err = lookPath("podman", "podman"); err != nil {
		return info, err
	}
	p.cgroups = watchCgroups("libpod_parent")
	if out, err := runCmd(ctx, 20*time.Second, p.bin, "--version"); err == nil {
		info.Version = firstLine(out)
	}
	return info, nil
}

func (p *podmanAnchor) Once(ctx context.Context) (Sample, error) {
	args := append([]string{"run", "--rm", "--network", "none", "--rootfs", p.w.Rootfs + ":O"}, p.w.Args...)
	cmd := exec.CommandContext(ctx, p.bin, args...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return Sample{}, fmt.Errorf("podman run: %w: %s", err, lastLines(string(out), 3))
	}
	return Sample{Value: Ms(d)}, nil
}

func (p *podmanAnchor) Close() error { return p.cgroups.remove() }

// dockerAnchor runs the command with docker from an image imported from
// the same root directory, through the given daemon socket; it can start a
// private dockerd when none answers.
type dockerAnchor struct {
	w       Workload
	host    string
	start   bool
	bin     string
	image   string
	daemon  *exec.Cmd
	exited  chan struct{}
	dir     string
	cgroups newCgroups
}

func (d *dockerAnchor) Name() string { return "docker" }

func (d *dockerAnchor) docker(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	return runCmd(ctx, timeout, d.bin, append([]string{"--host", d.host}, args...)...)
}

func (d *dockerAnchor) Setup(ctx context.Context) (Info, error) {
	info := Info{Command: "docker run --rm --network none IMAGE " + strings.Join(d.w.Args, " ") + " (IMAGE imported from DIR)"}
	var err error
	if d.bin, err = lookPath("docker", "docker.io"); err != nil {
		return info, err
	}
	if d.host == "" {
		d.host = os.Getenv("DOCKER_HOST")
	}
	if d.host == "" {
		d.host = "unix:///var/run/docker.sock"
	}
	ver, err := d.docker(ctx, 10*time.Second, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		if !d.start {
			return info, fmt.Errorf("no docker daemon answers at %s (start dockerd, pass --docker-host, or --start-dockerd): %w", d.host, err)
		}
		if err := d.startDaemon(ctx); err != nil {
			return info, err
		}
		if ver, err = d.docker(ctx, 10*time.Second, "version", "--format", "{{.Server.Version}}"); err != nil {
			return info, err
		}
		info.Note = "private dockerd started by the bench"
	}
	info.Version = "docker " + firstLine(ver)
	d.image = fmt.Sprintf("sbx-bench/rootfs:%d", os.Getpid())
	if err := d.importImage(ctx); err != nil {
		return info, err
	}
	return info, nil
}

// importImage streams a tar of the root directory into `docker import`.
func (d *dockerAnchor) importImage(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tarCmd := exec.CommandContext(ctx, "tar", "-C", d.w.Rootfs, "--numeric-owner", "-c", ".")
	imp := exec.CommandContext(ctx, d.bin, "--host", d.host, "import", "-", d.image)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return err
	}
	var tarErr, impOut bytes.Buffer
	tarCmd.Stderr = &tarErr
	imp.Stdin, imp.Stdout, imp.Stderr = pipe, &impOut, &impOut
	if err := tarCmd.Start(); err != nil {
		return fmt.Errorf("tar the root filesystem: %w", err)
	}
	impErr := imp.Run()
	if err := tarCmd.Wait(); err != nil {
		return fmt.Errorf("tar the root filesystem: %w: %s", err, lastLines(tarErr.String(), 2))
	}
	if impErr != nil {
		return fmt.Errorf("docker import: %w: %s", impErr, lastLines(impOut.String(), 2))
	}
	return nil
}

// startDaemon starts a private dockerd with its state in a temporary
// directory and waits until it answers.
func (d *dockerAnchor) startDaemon(ctx context.Context) error {
	bin, err := lookPath("dockerd", "docker.io")
	if err != nil {
		return err
	}
	if d.dir, err = os.MkdirTemp("", "sbx-bench-dockerd-"); err != nil {
		return err
	}
	d.host = "unix://" + filepath.Join(d.dir, "docker.sock")
	d.cgroups = watchCgroups("docker")
	logf, err := os.Create(filepath.Join(d.dir, "dockerd.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--host", d.host, "--data-root", filepath.Join(d.dir, "data"),
		"--exec-root", filepath.Join(d.dir, "exec"), "--pidfile", filepath.Join(d.dir, "dockerd.pid"),
		"--iptables=false", "--ip6tables=false", "--bridge=none")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start dockerd: %w", err)
	}
	d.daemon = cmd
	d.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			log, _ := os.ReadFile(filepath.Join(d.dir, "dockerd.log"))
			return fmt.Errorf("dockerd exited at start: %s", lastLines(string(log), 3))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := d.docker(ctx, 5*time.Second, "version", "--format", "{{.Server.Version}}"); err == nil {
			return nil
		}
	}
	log, _ := os.ReadFile(filepath.Join(d.dir, "dockerd.log"))
	return fmt.Errorf("dockerd did not answer within 60s: %s", lastLines(string(log), 3))
}

func (d *dockerAnchor) Once(ctx context.Context) (Sample, error) {
	args := append([]string{"--host", d.host, "run", "--rm", "--network", "none", d.image}, d.w.Args...)
	cmd := exec.CommandContext(ctx, d.bin, args...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	dur := time.Since(t0)
	if err != nil {
		return Sample{}, fmt.Errorf("docker run: %w: %s", err, lastLines(string(out), 3))
	}
	return Sample{Value: Ms(dur)}, nil
}

func (d *dockerAnchor) Close() error {
	var errs []error
	if d.daemon == nil && d.image != "" {
		if _, err := d.docker(context.Background(), 30*time.Second, "rmi", "--force", d.image); err != nil {
			errs = append(errs, err)
		}
	}
	if d.daemon != nil {
		_ = d.daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-d.daemon.Process.Pid, syscall.SIGKILL)
			<-d.exited
			errs = append(errs, errors.New("dockerd did not stop within 30s; killed"))
		}
		d.daemon = nil
	}
	if d.dir != "" {
		errs = append(errs, unmountUnder(d.dir), os.RemoveAll(d.dir), d.cgroups.remove())
		d.dir = ""
	}
	return errors.Join(errs...)
}

// newCgroups are the cgroup directories of one name that did not exist
// when watchCgroups was called: parents a runtime creates and leaves.
type newCgroups []string

// watchCgroups lists where a cgroup directory called name would appear
// (every v1 hierarchy and the v2 root) and is not there yet.
func watchCgroups(name string) newCgroups {
	var out newCgroups
	cands, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
	cands = append(cands, filepath.Join("/sys/fs/cgroup", name))
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			cands = append(cands, filepath.Join(d, name))
		}
	}
	seen := map[string]bool{}
	for _, c := range cands {
		if seen[c] {
			continue
		}
		seen[c] = true
		if _, err := os.Stat(c); os.IsNotExist(err) {
			out = append(out, c)
		}
	}
	return out
}

// remove deletes the watched directories that appeared, with any empty
// children, deepest first.
func (n newCgroups) remove() error {
	var errs []error
	for _, dir := range n {
		var all []string
		_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			if err := os.Remove(all[i]); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", all[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
