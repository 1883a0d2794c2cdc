// Package driver is the Nomad task driver for sbx: every task runs in an sbx
// sandbox on the node, through the same library front door (sbx.Sandboxes,
// sbx.Images) as sbx's CLI and REST server, with the same policy checks.
//
// A task is a sandbox whose main command (sbx.Options.Cmd) is the task's
// command. The sandbox outlives the plugin process, so a restarted Nomad
// client re-attaches to it by the sandbox ID kept in the task handle.
package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/client/lib/cpustats"
	"github.com/hashicorp/nomad/drivers/shared/eventer"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/drivers/fsisolation"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
)

const (
	// Name is the driver's name in job files: driver = "sbx".
	Name = "sbx"
	// Version is the plugin's version.
	Version = "0.1.0"
	// fingerprintPeriod is how often the node's health is reported.
	fingerprintPeriod = 30 * time.Second
	// taskHandleVersion is the version of the state kept in task handles.
	taskHandleVersion = 1
)

var pluginInfo = &base.PluginInfoResponse{
	Type:              base.PluginTypeDriver,
	PluginApiVersions: []string{drivers.ApiVersion010},
	PluginVersion:     Version,
	Name:              Name,
}

// capabilities are what the driver supports: signals, exec (checks and
// `nomad alloc exec`), an image root of its own, the host's network or one
// of its own, and Nomad's host volume mounts.
var capabilities = &drivers.Capabilities{
	SendSignals: true,
	Exec:        true,
	FSIsolation: fsisolation.Image,
	NetIsolationModes: []drivers.NetIsolationMode{
		drivers.NetIsolationModeHost,
		drivers.NetIsolationModeTask,
	},
	MountConfigs: drivers.MountConfigSupportAll,
}

// Driver runs Nomad tasks in sbx sandboxes.
type Driver struct {
	ctx     context.Context
	logger  hclog.Logger
	eventer *eventer.Eventer
	tasks   *taskStore

	mu       sync.Mutex
	config   *PluginConfig
	host     *sandbox.Host
	hostErr  error
	computed cpustats.Compute
	imports  keyedMutex
}

// New returns the driver; ctx ends with the plugin.
func New(ctx context.Context, logger hclog.Logger) *Driver {
	logger = logger.Named(Name)
	return &Driver{
		ctx:     ctx,
		logger:  logger,
		eventer: eventer.NewEventer(ctx, logger),
		tasks:   newTaskStore(),
	}
}

// Detach lets go of every task without touching it, for a plugin whose
// client died: each handle is cancelled, so its log forwarding stops
// between two chunks of output (the saved offset is exact), and Detach
// waits up to timeout for that. The tasks run on; the next plugin
// recovers them.
func (d *Driver) Detach(timeout time.Duration) {
	hs := d.tasks.all()
	for _, h := range hs {
		h.cancel()
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, h := range hs {
		select {
		case <-h.logsDone:
		case <-deadline.C:
			d.logger.Warn("log forwarding did not stop in time", "timeout", timeout)
			return
		}
	}
}

// PluginInfo describes the plugin to Nomad.
func (d *Driver) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }

// ConfigSchema is the schema of the plugin's agent configuration.
func (d *Driver) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

// SetConfig applies the agent's plugin configuration and opens sbx's state
// on the node. Nomad calls it once when it starts the plugin.
func (d *Driver) SetConfig(cfg *base.Config) error {
	var pc PluginConfig
	if cfg != nil && len(cfg.PluginConfig) != 0 {
		if err := base.MsgPackDecode(cfg.PluginConfig, &pc); err != nil {
			return fmt.Errorf("decode sbx plugin config: %w", err)
		}
	}
	if err := pc.validate(); err != nil {
		return err
	}
	gcEvery, _ := pc.gcInterval()

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.config != nil && (d.config.Root != pc.Root || d.config.RunRoot != pc.RunRoot) {
		return fmt.Errorf("sbx plugin config: root and run_root cannot change while the plugin runs (restart the Nomad client)")
	}
	if cfg != nil && cfg.AgentConfig != nil {
		d.computed = cfg.AgentConfig.Compute()
	}
	first := d.config == nil
	d.config = &pc
	if !first {
		return nil
	}
	d.host, d.hostErr = sandbox.Open(sandbox.HostConfig{
		Root:               pc.Root,
		RunRoot:            pc.RunRoot,
		Pull:               pc.PullPolicy,
		InsecureRegistries: pc.InsecureRegistries,
		Executor:           pc.SbxBinary,
		HostNetNS:          pc.HostNetNS,
		Policy: &sbx.Policy{
			AllowedHostDirs:  pc.AllowedHostPaths,
			AllowHostNetwork: pc.AllowHostNetwork,
			AllowPrivileged:  pc.AllowPrivileged,
		},
		Logger: slogFor(d.logger.Named("sbx")),
	})
	if d.hostErr != nil {
		// The fingerprint reports it; Nomad keeps the driver unhealthy.
		d.logger.Error("cannot open sbx state", "root", pc.Root, "run_root", pc.RunRoot, "error", d.hostErr)
		return nil
	}
	if gcEvery > 0 {
		go d.collectGarbage(gcEvery)
	}
	return nil
}

// pluginConfig returns the configuration SetConfig applied.
func (d *Driver) pluginConfig() PluginConfig {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.config == nil {
		return PluginConfig{}
	}
	return *d.config
}

// compute is the node's CPU compute, as the agent reported it.
func (d *Driver) compute() cpustats.Compute {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.computed
}

// sbxHost returns the node's sbx host, or why there is none.
func (d *Driver) sbxHost() (*sandbox.Host, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.config == nil:
		return nil, errors.New("sbx driver: not configured yet")
	case d.hostErr != nil:
		return nil, fmt.Errorf("sbx driver: cannot use sbx state under %s: %w", d.config.Root, d.hostErr)
	}
	return d.host, nil
}

// TaskConfigSchema is the schema of a task's config block.
func (d *Driver) TaskConfigSchema() (*hclspec.Spec, error) { return taskConfigSpec, nil }

// Capabilities says what the driver supports.
func (d *Driver) Capabilities() (*drivers.Capabilities, error) { return capabilities, nil }

// Fingerprint reports the node's health for the driver now and every
// fingerprintPeriod until ctx ends.
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	ch := make(chan *drivers.Fingerprint)
	go func() {
		defer close(ch)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			case <-t.C:
				t.Reset(fingerprintPeriod)
			}
			select {
			case ch <- d.fingerprint(ctx):
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// fingerprint checks that sbx can run sandboxes here: root, the sbx state,
// seccomp, overlayfs and cgroups.
func (d *Driver) fingerprint(ctx context.Context) *drivers.Fingerprint {
	if os.Geteuid() != 0 {
		return &drivers.Fingerprint{Health: drivers.HealthStateUndetected, HealthDescription: drivers.DriverRequiresRootMessage}
	}
	host, err := d.sbxHost()
	if err != nil {
		return &drivers.Fingerprint{Health: drivers.HealthStateUnhealthy, HealthDescription: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := host.Info(ctx)
	if err != nil {
		return &drivers.Fingerprint{Health: drivers.HealthStateUnhealthy, HealthDescription: fmt.Sprintf("sbx host facts: %v", err)}
	}
	fp := &drivers.Fingerprint{
		Attributes: map[string]*pstructs.Attribute{
			"driver.sbx":             pstructs.NewBoolAttribute(true),
			"driver.sbx.version":     pstructs.NewStringAttribute(info.Version),
			"driver.sbx.cgroup_mode": pstructs.NewStringAttribute(info.CgroupMode),
			"driver.sbx.kernel":      pstructs.NewStringAttribute(info.Kernel),
			"driver.sbx.seccomp":     pstructs.NewBoolAttribute(info.Seccomp),
		},
		Health:            drivers.HealthStateHealthy,
		HealthDescription: drivers.DriverHealthy,
	}
	var missing []string
	if !info.Seccomp {
		missing = append(missing, "seccomp")
	}
	if !info.Overlayfs {
		missing = append(missing, "overlayfs")
	}
	if len(info.CgroupControllers) == 0 {
		missing = append(missing, "cgroup controllers")
	}
	if len(missing) > 0 {
		fp.Health = drivers.HealthStateUnhealthy
		fp.HealthDescription = "sbx cannot run sandboxes here: no " + strings.Join(missing, ", ")
	}
	return fp
}

// TaskEvents streams the driver's task events.
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.eventer.TaskEvents(ctx)
}

// emit sends a task event, as `nomad alloc status` shows them.
func (d *Driver) emit(cfg *drivers.TaskConfig, msg string) {
	_ = d.eventer.EmitEvent(&drivers.TaskEvent{
		TaskID:    cfg.ID,
		TaskName:  cfg.Name,
		AllocID:   cfg.AllocID,
		Timestamp: time.Now(),
		Message:   msg,
	})
}

// collectGarbage runs sbx's garbage collection (what crashes left, unused
// image layers) every interval until the plugin stops.
func (d *Driver) collectGarbage(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		host, err := d.sbxHost()
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(d.ctx, every)
		if rep, err := host.GC(ctx); err != nil {
			d.logger.Warn("sbx gc failed", "error", err)
		} else if rep != nil && len(rep.Interrupted)+len(rep.Orphans)+len(rep.Stopped) > 0 {
			d.logger.Info("sbx gc", "interrupted", rep.Interrupted, "stopped", rep.Stopped, "orphans", rep.Orphans)
		}
		if rep, err := host.GCImages(ctx); err != nil {
			d.logger.Warn("sbx image gc failed", "error", err)
		} else if rep != nil && len(rep.RemovedLayers) > 0 {
			d.logger.Info("sbx image gc", "layers", len(rep.RemovedLayers), "freed_bytes", rep.FreedBytes)
		}
		cancel()
	}
}

// keyedMutex serialises work per key (image imports per image name).
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*sync.Mutex{}
	}
	l := k.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		k.locks[key] = l
	}
	k.mu.Unlock()
	l.Lock()
	return l.Unlock
}
