package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/nomad/client/lib/cpustats"
	cstructs "github.com/hashicorp/nomad/client/structs"
	"github.com/hashicorp/nomad/plugins/drivers"

	"github.com/sbxrun/sbx"
)

// Timeouts of the driver's own calls into sbx.
const (
	// startTimeout bounds a task's image pull or import and its sandbox's
	// create.
	startTimeout = 15 * time.Minute
	// callTimeout bounds the short calls (signal, stats, remove).
	callTimeout = time.Minute
	// killGrace is how long StopTask waits after SIGKILL of the main
	// command before it stops the whole sandbox.
	killGrace = 10 * time.Second
	// defaultKillSignal is sent by StopTask when the job sets none, as
	// Nomad's other drivers do.
	defaultKillSignal = "SIGINT"
)

var _ drivers.ExecTaskStreamingDriver = (*Driver)(nil)

// StartTask creates the task's sandbox, with the task's command as its main
// command, and starts following it.
func (d *Driver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	if _, ok := d.tasks.get(cfg.ID); ok {
		return nil, nil, fmt.Errorf("task %s is already started", cfg.ID)
	}
	var tc TaskConfig
	if err := cfg.DecodeDriverConfig(&tc); err != nil {
		return nil, nil, fmt.Errorf("decode the sbx task config: %w", err)
	}
	if err := tc.validate(); err != nil {
		return nil, nil, err
	}
	host, err := d.sbxHost()
	if err != nil {
		return nil, nil, err
	}
	pc := d.pluginConfig()
	// The task's own directories are trusted; the job's volumes and image
	// path must be under the operator's allowed_host_paths.
	view, err := host.WithPolicy(&sbx.Policy{
		AllowedHostDirs:  allowedDirs(pc.AllowedHostPaths, cfg),
		AllowHostNetwork: pc.AllowHostNetwork,
		AllowPrivileged:  pc.AllowPrivileged,
	})
	if err != nil {
		return nil, nil, err
	}
	// An image_path import reads a host file into the node's shared image
	// cache: only from the operator's allowed_host_paths.
	jobView, err := host.WithPolicy(&sbx.Policy{
		AllowedHostDirs:  pc.AllowedHostPaths,
		AllowHostNetwork: pc.AllowHostNetwork,
		AllowPrivileged:  pc.AllowPrivileged,
	})
	if err != nil {
		return nil, nil, err
	}

	ctx, cancel := context.WithTimeout(d.ctx, startTimeout)
	defer cancel()
	img, err := d.ensureImage(ctx, cfg, &tc, pc.PullPolicy, jobView)
	if err != nil {
		return nil, nil, err
	}
	opts, err := d.sandboxOptions(cfg, &tc, img)
	if err != nil {
		return nil, nil, err
	}
	opts.Name = sandboxName(cfg)
	if tc.Pool != "" {
		if opts, err = poolOptions(ctx, host, jobView, cfg, &tc, opts, img); err != nil {
			return nil, nil, err
		}
	}
	sb, err := view.Create(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("sbx: create the task's sandbox: %w", err)
	}
	if tc.Pool != "" {
		if sb.FromPool != "" {
			d.emit(cfg, fmt.Sprintf("Claimed an idle member of warm pool %s", tc.Pool))
		} else {
			why := "no idle member"
			if sb.CreateTimings != nil && sb.CreateTimings.Pool != "" {
				why = sb.CreateTimings.Pool
			}
			d.emit(cfg, fmt.Sprintf("Warm pool %s did not serve the task (%s): started cold", tc.Pool, why))
		}
		go d.refillPool(host, tc.Pool)
	}

	st := taskState{SandboxID: sb.ID, StartedAt: time.Now().Round(time.Millisecond)}
	if sb.Started != nil {
		st.StartedAt = *sb.Started
	}
	if sb.Network != nil && sb.Network.Mode == sbx.NetworkBridge && sb.Network.IP.IsValid() {
		st.Network = &drivers.DriverNetwork{IP: sb.Network.IP.String(), PortMap: portMap(cfg, tc.Ports)}
	}
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(&st); err != nil {
		d.removeSandbox(sb.ID)
		return nil, nil, fmt.Errorf("save the task's state: %w", err)
	}
	h := newTaskHandle(d.ctx, host, cfg, st, d.logger)
	d.tasks.add(h)
	go h.run()
	d.logger.Info("task started", "alloc_id", cfg.AllocID, "task", cfg.Name, "sandbox", sb.ID)
	return handle, st.Network, nil
}

// ensureImage returns the task's image from the node's cache, pulling it
// or importing it from image_path first as the pull policy says.
func (d *Driver) ensureImage(ctx context.Context, cfg *drivers.TaskConfig, tc *TaskConfig, policy string, images sbx.Images) (*sbx.Image, error) {
	unlock := d.imports.lock(tc.Image)
	defer unlock()
	img, err := images.InspectImage(ctx, tc.Image)
	switch {
	case err == nil && (policy != sbx.PullAlways || tc.ImagePath != ""):
		return img, nil
	case err != nil && !errors.Is(err, sbx.ErrImageNotFound) && !errors.Is(err, sbx.ErrNotFound):
		return nil, fmt.Errorf("sbx: image %s: %w", tc.Image, err)
	}
	if tc.ImagePath != "" {
		d.emit(cfg, fmt.Sprintf("Importing image %s from %s", tc.Image, tc.ImagePath))
		img, err := images.ImportImage(ctx, sbx.ImportOptions{Path: tc.ImagePath, Name: tc.Image})
		if err != nil {
			return nil, fmt.Errorf("sbx: import image %s from %s: %w", tc.Image, tc.ImagePath, err)
		}
		return images.InspectImage(ctx, img.Name)
	}
	if policy == sbx.PullNever {
		return nil, fmt.Errorf("sbx: image %s is not in the node's cache and the plugin's pull_policy is never", tc.Image)
	}
	d.emit(cfg, fmt.Sprintf("Pulling image %s", tc.Image))
	start := time.Now()
	if _, err := images.PullImage(ctx, tc.Image, nil); err != nil {
		return nil, fmt.Errorf("sbx: pull image %s: %w", tc.Image, err)
	}
	d.emit(cfg, fmt.Sprintf("Pulled image %s in %s", tc.Image, time.Since(start).Round(time.Millisecond)))
	return images.InspectImage(ctx, tc.Image)
}

// RecoverTask re-attaches to a task's sandbox after the plugin (or the
// whole client) restarted: nothing restarts, the handle follows the
// running sandbox again.
func (d *Driver) RecoverTask(handle *drivers.TaskHandle) error {
	if handle == nil || handle.Config == nil {
		return errors.New("sbx driver: recover: no task handle")
	}
	if _, ok := d.tasks.get(handle.Config.ID); ok {
		return nil
	}
	var st taskState
	if err := handle.GetDriverState(&st); err != nil {
		return fmt.Errorf("sbx driver: recover: decode the task's state: %w", err)
	}
	if st.SandboxID == "" {
		return errors.New("sbx driver: recover: the task's state names no sandbox")
	}
	host, err := d.sbxHost()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(d.ctx, callTimeout)
	defer cancel()
	sb, err := host.Get(ctx, st.SandboxID)
	if err != nil {
		return fmt.Errorf("sbx driver: recover sandbox %s: %w", st.SandboxID, err)
	}
	if got := sb.Options.Labels[LabelTaskID]; got != handle.Config.ID {
		return fmt.Errorf("sbx driver: recover: sandbox %s belongs to task %q, not %q", st.SandboxID, got, handle.Config.ID)
	}
	h := newTaskHandle(d.ctx, host, handle.Config, st, d.logger)
	if d.tasks.add(h) {
		go h.run()
		d.logger.Info("task recovered", "alloc_id", handle.Config.AllocID, "task", handle.Config.Name, "sandbox", st.SandboxID)
	}
	return nil
}

// WaitTask returns a channel that gets how the task ended.
func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	ch := make(chan *drivers.ExitResult, 1)
	go func() {
		defer close(ch)
		select {
		case <-h.done:
			ch <- h.exitResult()
		case <-ctx.Done():
		case <-d.ctx.Done():
		}
	}()
	return ch, nil
}

// StopTask sends the task's kill signal to its main command, SIGKILL after
// timeout, and stops the whole sandbox if even that is not enough.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if !h.isRunning() {
		return nil
	}
	if signal == "" {
		signal = defaultKillSignal
	}
	d.signal(h, signal)
	if waitDone(h, timeout) {
		return nil
	}
	d.signal(h, "SIGKILL")
	if waitDone(h, killGrace) {
		return nil
	}
	ctx, cancel := context.WithTimeout(d.ctx, callTimeout)
	defer cancel()
	if _, err := h.sbxs.Stop(ctx, h.sandboxID, sbx.StopOptions{Signal: "SIGKILL", Timeout: time.Second}); err != nil && !errors.Is(err, sbx.ErrNotFound) {
		return fmt.Errorf("sbx: stop sandbox %s: %w", h.sandboxID, err)
	}
	if !waitDone(h, killGrace) {
		return fmt.Errorf("sbx: task %s did not end after its sandbox %s was stopped", taskID, h.sandboxID)
	}
	return nil
}

// signal sends sig to the task's main command, logging failures (the
// command may have just ended).
func (d *Driver) signal(h *taskHandle, sig string) {
	ctx, cancel := context.WithTimeout(d.ctx, callTimeout)
	defer cancel()
	if err := h.sbxs.Signal(ctx, h.sandboxID, sig); err != nil && h.isRunning() {
		h.logger.Warn("signal the task", "signal", sig, "error", err)
	}
}

// waitDone waits up to d for the task to end.
func waitDone(h *taskHandle, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.done:
		return true
	case <-t.C:
		return false
	}
}

// DestroyTask removes the task's sandbox and everything it made.
func (d *Driver) DestroyTask(taskID string, force bool) error {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if h.isRunning() && !force {
		return errors.New("sbx driver: cannot destroy a running task without force")
	}
	h.cancel()
	if err := d.removeSandbox(h.sandboxID); err != nil {
		return err
	}
	d.tasks.remove(taskID)
	return nil
}

// removeSandbox removes a sandbox, killing it if it runs.
func (d *Driver) removeSandbox(id string) error {
	host, err := d.sbxHost()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := host.Remove(ctx, id, sbx.RemoveOptions{Force: true}); err != nil && !errors.Is(err, sbx.ErrNotFound) {
		return fmt.Errorf("sbx: remove sandbox %s: %w", id, err)
	}
	return nil
}

// InspectTask reports the task's status.
func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h.status(), nil
}

// TaskStats sends the sandbox's CPU and memory use, from its cgroups, every
// interval until ctx ends or the task does.
func (d *Driver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	if interval <= 0 {
		interval = time.Second
	}
	ch := make(chan *drivers.TaskResourceUsage)
	go func() {
		defer close(ch)
		compute := d.compute()
		total, user, system := cpustats.New(compute), cpustats.New(compute), cpustats.New(compute)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.done:
				return
			case <-t.C:
				t.Reset(interval)
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			u, err := h.sbxs.Stats(cctx, h.sandboxID)
			cancel()
			if err != nil {
				if h.isRunning() {
					h.logger.Debug("read the sandbox's usage", "error", err)
				}
				continue
			}
			select {
			case ch <- taskUsage(u, total, user, system):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// taskUsage converts a sandbox's usage into Nomad's, with CPU percentages
// from the trackers' previous samples.
func taskUsage(u *sbx.Usage, total, user, system *cpustats.Tracker) *drivers.TaskResourceUsage {
	const ns = float64(time.Second)
	pct := total.Percent(u.CPUTimeS * ns)
	return &drivers.TaskResourceUsage{
		Timestamp: time.Now().UnixNano(),
		ResourceUsage: &cstructs.ResourceUsage{
			MemoryStats: &cstructs.MemoryStats{
				RSS:      u.MemoryCurrentBytes,
				Usage:    u.MemoryCurrentBytes,
				MaxUsage: u.MemoryPeakBytes,
				Measured: []string{"RSS", "Usage", "Max Usage"},
			},
			CpuStats: &cstructs.CpuStats{
				UserMode:      user.Percent(u.UserTimeS * ns),
				SystemMode:    system.Percent(u.SysTimeS * ns),
				Percent:       pct,
				TotalTicks:    total.TicksConsumed(pct),
				ThrottledTime: uint64(u.CPUThrottledS * ns),
				Measured:      []string{"System Mode", "User Mode", "Percent", "Throttled Time"},
			},
		},
	}
}

// SignalTask sends a signal to the task's main command.
func (d *Driver) SignalTask(taskID, signal string) error {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	ctx, cancel := context.WithTimeout(d.ctx, callTimeout)
	defer cancel()
	if err := h.sbxs.Signal(ctx, h.sandboxID, signal); err != nil {
		return fmt.Errorf("sbx: signal the task: %w", err)
	}
	return nil
}

// ExecTask runs a command in the task's sandbox (script checks, `nomad
// alloc exec` without a terminal goes through ExecTaskStreaming).
func (d *Driver) ExecTask(taskID string, cmd []string, timeout time.Duration) (*drivers.ExecTaskResult, error) {
	if len(cmd) == 0 {
		return nil, errors.New("sbx driver: exec needs a command")
	}
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	ctx, cancel := context.WithTimeout(d.ctx, timeout+callTimeout)
	defer cancel()
	res, err := h.sbxs.Exec(ctx, h.sandboxID, sbx.ExecRequest{Argv: cmd, Timeout: timeout}, nil)
	if err != nil {
		return nil, fmt.Errorf("sbx: exec in sandbox %s: %w", h.sandboxID, err)
	}
	return &drivers.ExecTaskResult{
		Stdout:     []byte(res.Stdout),
		Stderr:     []byte(res.Stderr),
		ExitResult: &drivers.ExitResult{ExitCode: res.ExitCode},
	}, nil
}

// ExecTaskStreaming runs an interactive command in the task's sandbox, with
// a terminal when asked (`nomad alloc exec -i -t`).
func (d *Driver) ExecTaskStreaming(ctx context.Context, taskID string, o *drivers.ExecOptions) (*drivers.ExitResult, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("sbx driver: exec needs a command")
	}
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	resize := make(chan [2]uint16, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s, ok := <-o.ResizeCh:
				if !ok {
					return
				}
				select {
				case resize <- [2]uint16{uint16(s.Width), uint16(s.Height)}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	var stdin io.Reader
	in := &eofSignal{eof: make(chan struct{})}
	if o.Stdin != nil {
		in.r = o.Stdin
		stdin = in
	}
	res, err := h.sbxs.Attach(ctx, h.sandboxID, sbx.AttachOptions{
		ExecRequest: sbx.ExecRequest{Argv: o.Command},
		Tty:         o.Tty,
		Stdin:       stdin,
		Stdout:      o.Stdout,
		Stderr:      o.Stderr,
		Resize:      resize,
	})
	if err != nil {
		return nil, fmt.Errorf("sbx: exec in sandbox %s: %w", h.sandboxID, err)
	}
	// Without a terminal the client closes its input right after a short
	// command: take that close before answering, or Nomad's client may
	// forward it into the finished stream and drop the exit code (it
	// reports "unexpected EOF" then). Bounded: input may never end.
	if stdin != nil && !o.Tty {
		select {
		case <-in.eof:
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
	return &drivers.ExitResult{ExitCode: res.ExitCode}, nil
}

// eofSignal is a reader that closes eof when its reader ends.
type eofSignal struct {
	r    io.Reader
	eof  chan struct{}
	once sync.Once
}

func (e *eofSignal) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}
