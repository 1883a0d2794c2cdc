package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// idleArgs keep a long-lived anchor container running.
var idleArgs = []string{"sleep", "3600"}

// newDetached returns the anchor of a long-lived scenario: "ready" times
// starting a detached container of an idle process (its removal is not
// timed); "exec" starts one in Setup and times running the command in it.
func newDetached(name string, w Workload, c Compare, mode string) Subject {
	switch name {
	case "runc", "crun", "docker", "podman":
		return &detachedAnchor{name: name, w: w, c: c, mode: mode}
	case "bwrap":
		return failed{name: name, err: fmt.Errorf("bwrap has no detached, long-lived containers: no equivalent of %s", mode)}
	}
	return NewAnchor(name, w, c)
}

// detachedAnchor drives a runtime's CLI: run -d, exec, delete.
type detachedAnchor struct {
	name, mode string
	w          Workload
	c          Compare
	oci        *ociCLI       // runc, crun
	docker     *dockerAnchor // docker
	podman     *podmanAnchor // podman
	id         string        // the container of the exec mode
}

func (d *detachedAnchor) Name() string { return d.name }

func (d *detachedAnchor) Setup(ctx context.Context) (Info, error) {
	idle := d.w
	idle.Args = idleArgs
	var info Info
	var err error
	switch d.name {
	case "runc", "crun":
		d.oci = &ociCLI{name: d.name, w: idle}
		info, err = d.oci.Setup(ctx)
	case "docker":
		d.docker = &dockerAnchor{w: idle, host: d.c.DockerHost, start: d.c.StartDockerd}
		info, err = d.docker.Setup(ctx)
	case "podman":
		d.podman = &podmanAnchor{w: idle}
		info, err = d.podman.Setup(ctx)
	}
	info.Command = d.describe()
	if err != nil || d.mode != "exec" {
		return info, err
	}
	d.id, err = d.start(ctx)
	return info, err
}

func (d *detachedAnchor) describe() string {
	cmd := strings.Join(d.w.Args, " ")
	switch {
	case d.mode == "exec" && d.docker != nil:
		return "docker exec ID " + cmd
	case d.mode == "exec" && d.podman != nil:
		return "podman exec ID " + cmd
	case d.mode == "exec":
		return d.name + " exec ID " + cmd
	case d.docker != nil:
		return "docker run -d --network none IMAGE sleep 3600 (removal not timed)"
	case d.podman != nil:
		return "podman run -d --network none --rootfs DIR:O sleep 3600 (removal not timed)"
	}
	return d.name + " run -d --bundle DIR ID, the process sleep 3600 (removal not timed)"
}

// cli runs the runtime's CLI with stdio on /dev/null (a detached
// container inherits them) and returns its combined output on error.
func (d *detachedAnchor) cli(ctx context.Context, args ...string) (string, error) {
	var bin string
	verb := args[0]
	switch {
	case d.oci != nil:
		bin = d.oci.bin
		if d.oci.view != nil {
			bin, args = d.oci.view.wrap(bin, args)
		}
	case d.docker != nil:
		bin, args = d.docker.bin, append([]string{"--host", d.docker.host}, args...)
	case d.podman != nil:
		bin = d.podman.bin
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := os.CreateTemp("", "sbx-bench-out-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(f.Name())
		return string(out), fmt.Errorf("%s %s: %w: %s", d.name, verb, err, lastLines(string(out), 3))
	}
	out, _ := os.ReadFile(f.Name())
	return string(out), nil
}

// start starts a detached idle container and returns its id.
func (d *detachedAnchor) start(ctx context.Context) (string, error) {
	switch {
	case d.docker != nil:
		out, err := d.cli(ctx, append([]string{"run", "-d", "--network", "none", d.docker.image}, idleArgs...)...)
		return firstLine(out), err
	case d.podman != nil:
		out, err := d.cli(ctx, append([]string{"run", "-d", "--network", "none", "--rootfs", d.w.Rootfs + ":O"}, idleArgs...)...)
		return firstLine(out), err
	}
	id := nextID("sbx-bench-" + d.name)
	_, err := d.cli(ctx, "run", "-d", "--bundle", d.oci.bundle, id)
	if err != nil {
		_, _ = d.cli(context.Background(), "delete", "--force", id)
	}
	return id, err
}

func (d *detachedAnchor) remove(id string) error {
	if id == "" {
		return nil
	}
	var err error
	switch {
	case d.docker != nil, d.podman != nil:
		_, err = d.cli(context.Background(), "rm", "--force", id)
	default:
		_, err = d.cli(context.Background(), "delete", "--force", id)
	}
	return err
}

func (d *detachedAnchor) Once(ctx context.Context) (Sample, error) {
	if d.mode == "exec" {
		args := append([]string{"exec", d.id}, d.w.Args...)
		t0 := time.Now()
		_, err := d.cli(ctx, args...)
		return Sample{Value: Ms(time.Since(t0))}, err
	}
	t0 := time.Now()
	id, err := d.start(ctx)
	dur := time.Since(t0)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Value: Ms(dur)}, d.remove(id)
}

func (d *detachedAnchor) Close() error {
	err := d.remove(d.id)
	switch {
	case d.oci != nil:
		return joinErr(err, d.oci.Close())
	case d.docker != nil:
		return joinErr(err, d.docker.Close())
	case d.podman != nil:
		return joinErr(err, d.podman.Close())
	}
	return err
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return fmt.Errorf("%w; %v", a, b)
}

// churnAnchor creates and removes detached idle containers, n at a time.
type churnAnchor struct {
	detachedAnchor
	n int
}

func newChurnAnchor(name string, w Workload, c Compare, n int) Subject {
	if name == "bwrap" {
		return failed{name: name + fmt.Sprintf(" c=%d", n), err: fmt.Errorf("bwrap has no detached, long-lived containers: no equivalent of churn")}
	}
	if name != "runc" && name != "crun" && name != "docker" && name != "podman" {
		return NewAnchor(name, w, c)
	}
	return &churnAnchor{detachedAnchor: detachedAnchor{name: name, w: w, c: c, mode: "churn"}, n: n}
}

func (a *churnAnchor) Name() string { return fmt.Sprintf("%s c=%d", a.name, a.n) }

func (a *churnAnchor) Setup(ctx context.Context) (Info, error) {
	info, err := a.detachedAnchor.Setup(ctx)
	info.Command = fmt.Sprintf("%d workers, each %s then removal, %d cycles per sample", a.n, strings.TrimSuffix(info.Command, " (removal not timed)"), churnBatch(a.n))
	return info, err
}

func (a *churnAnchor) Once(ctx context.Context) (Sample, error) {
	return churn(ctx, a.n, churnBatch(a.n), func(ctx context.Context) error {
		id, err := a.start(ctx)
		if err != nil {
			return err
		}
		return a.remove(id)
	})
}
