// Package driver is the Nomad task driver for sbx: every task runs in an sbx
// sandbox on the node, through the same library front door (sbx.Sandboxes,
// sbx.Images) as sbx's CLI and REST server, with the same policy checks.
package driver

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/drivers/shared/eventer"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	"github.com/hashicorp/nomad/plugins/drivers/fsisolation"
	"github.com/hashicorp/nomad/plugins/shared/hclspec"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"
)

const (
	// Name is the driver's name in job files: driver = "sbx".
	Name = "sbx"
	// Version is the plugin's version.
	Version = "0.1.0"
	// fingerprintPeriod is how often the node's health is reported.
	fingerprintPeriod = 30 * time.Second
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

	mu     sync.Mutex
	config *PluginConfig
}

// New returns the driver; ctx ends with the plugin.
func New(ctx context.Context, logger hclog.Logger) *Driver {
	logger = logger.Named(Name)
	return &Driver{
		ctx:     ctx,
		logger:  logger,
		eventer: eventer.NewEventer(ctx, logger),
	}
}

// PluginInfo describes the plugin to Nomad.
func (d *Driver) PluginInfo() (*base.PluginInfoResponse, error) { return pluginInfo, nil }

// ConfigSchema is the schema of the plugin's agent configuration.
func (d *Driver) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

// SetConfig applies the agent's plugin configuration.
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
	d.mu.Lock()
	d.config = &pc
	d.mu.Unlock()
	return nil
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
			case ch <- d.fingerprint():
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// fingerprint checks that sbx can run sandboxes here.
func (d *Driver) fingerprint() *drivers.Fingerprint {
	if os.Geteuid() != 0 {
		return &drivers.Fingerprint{Health: drivers.HealthStateUndetected, HealthDescription: drivers.DriverRequiresRootMessage}
	}
	return &drivers.Fingerprint{
		Attributes: map[string]*pstructs.Attribute{
			"driver.sbx":         pstructs.NewBoolAttribute(true),
			"driver.sbx.version": pstructs.NewStringAttribute(Version),
		},
		Health:            drivers.HealthStateHealthy,
		HealthDescription: drivers.DriverHealthy,
	}
}

// TaskEvents streams the driver's task events.
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.eventer.TaskEvents(ctx)
}
