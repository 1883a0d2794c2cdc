package driver

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/nomad/plugins/drivers"
)

// errNotYet: the task methods wait for the library's front door.
var errNotYet = errors.New("sbx driver: tasks are not implemented yet")

func (d *Driver) RecoverTask(*drivers.TaskHandle) error { return errNotYet }
func (d *Driver) StartTask(*drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	return nil, nil, errNotYet
}
func (d *Driver) WaitTask(context.Context, string) (<-chan *drivers.ExitResult, error) {
	return nil, errNotYet
}
func (d *Driver) StopTask(string, time.Duration, string) error { return errNotYet }
func (d *Driver) DestroyTask(string, bool) error               { return errNotYet }
func (d *Driver) InspectTask(string) (*drivers.TaskStatus, error) {
	return nil, errNotYet
}
func (d *Driver) TaskStats(context.Context, string, time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	return nil, errNotYet
}
func (d *Driver) SignalTask(string, string) error { return errNotYet }
func (d *Driver) ExecTask(string, []string, time.Duration) (*drivers.ExecTaskResult, error) {
	return nil, errNotYet
}
