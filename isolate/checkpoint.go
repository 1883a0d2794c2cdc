package isolate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/sbxrun/sbx/cgroup"
)

// Options that libcontainer's CriuOpts lacks go through the CRIU
// configuration file libcontainer passes to criu: every sandbox gets the
// org.criu.config label naming one in its state directory. A sandbox must
// hold nothing of the host's when it is dumped (the executor lets go of
// its listening socket and log first: see executor/api.PathCheckpointPrepare).

// criuConfigLabel is the libcontainer label naming a container's CRIU
// configuration file.
const criuConfigLabel = "org.criu.config"

// criuConfigName is that file, in the container's libcontainer state
// directory.
const criuConfigName = "criu.conf"

// CheckpointOptions says where and how to checkpoint a sandbox.
type CheckpointOptions struct {
	// ImageDir receives CRIU's images; created 0700 if missing.
	ImageDir string
	// WorkDir receives CRIU's log (dump.log).
	WorkDir string
	// LeaveRunning keeps the sandbox after the dump. To copy its files
	// while they match the dump, pause it first: CRIU leaves a frozen
	// sandbox frozen.
	LeaveRunning bool
}

// Checkpoint dumps the sandbox's processes with CRIU (libcontainer's
// Checkpoint). Without LeaveRunning they are gone afterwards. It must run
// in the mount namespace the container was started from (see
// rootfs.Namespaces), where its root is mounted; UseCRIU must have been
// called.
func (c *Container) Checkpoint(o CheckpointOptions) error {
	conf, err := c.criuConfigPath()
	if err != nil {
		return err
	}
	if c.Pid() <= 0 {
		return fmt.Errorf("checkpoint sandbox %s: it is not running", c.ID())
	}
	if err := writeCRIUConfig(conf, criuOptions); err != nil {
		return err
	}
	err = c.lc.Checkpoint(&libcontainer.CriuOpts{
		ImagesDirectory: o.ImageDir,
		WorkDirectory:   o.WorkDir,
		LeaveRunning:    o.LeaveRunning,
		FileLocks:       true,
		LinkRemap:       true,
	})
	if err != nil {
		return fmt.Errorf("checkpoint sandbox %s: %w%s", c.ID(), err, criuLogTail(o.WorkDir, "dump.log"))
	}
	return nil
}

// criuOptions are CRIU options of both dump and restore: established
// TCP connections are not kept (the peer outside would see a connection
// come back from a copy, or twice after a fork); they restore closed.
var criuOptions = []string{"tcp-close"}

// RestoreOptions says what to restore a sandbox from: CRIU's images, and
// where its log goes.
type RestoreOptions struct {
	ImageDir, WorkDir string
}

// Restore recreates the sandbox described by s (its root prepared, with the
// files of the checkpoint) under stateRoot and restores its processes from
// a checkpoint. It must run in the mount namespace s.Rootfs is mounted in;
// UseCRIU must have been called. On error nothing is left of the
// container (its cgroups and state are removed).
func Restore(stateRoot string, s *Spec, o RestoreOptions) (_ *Container, retErr error) {
	cfg, err := libcontainerConfig(s, false)
	if err != nil {
		return nil, err
	}
	cfg.Labels = append(cfg.Labels, criuConfigLabel+"="+filepath.Join(stateRoot, s.ID, criuConfigName))
	if err := cgroup.EnsureParent(cgroup.Limits{}); err != nil {
		return nil, err
	}
	lc, err := libcontainer.Create(stateRoot, s.ID, cfg)
	if err != nil {
		return nil, fmt.Errorf("create container %s: %w", s.ID, err)
	}
	c := &Container{lc: lc}
	defer func() {
		if retErr != nil {
			_ = c.Kill()
			_ = c.Destroy()
		}
	}()
	p := &libcontainer.Process{Init: true}
	if err := writeCRIUConfig(filepath.Join(stateRoot, s.ID, criuConfigName), criuOptions); err != nil {
		return nil, err
	}
	err = lc.Restore(p, &libcontainer.CriuOpts{
		ImagesDirectory: o.ImageDir,
		WorkDirectory:   o.WorkDir,
		FileLocks:       true,
	})
	if err != nil {
		return nil, fmt.Errorf("restore sandbox %s: %w%s", s.ID, err, criuLogTail(o.WorkDir, "restore.log"))
	}
	c.proc = p
	return c, nil
}

// criuConfigPath is the CRIU configuration file libcontainer passes to
// criu for this container.
func (c *Container) criuConfigPath() (string, error) {
	for _, l := range c.lc.Config().Labels {
		if v, ok := strings.CutPrefix(l, criuConfigLabel+"="); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("sandbox %s was started by an sbx without checkpoint support: stop and start it once to checkpoint it", c.ID())
}

func writeCRIUConfig(path string, lines []string) error {
	data := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		return fmt.Errorf("write CRIU configuration: %w", err)
	}
	return nil
}

// criuLogTail is the end of CRIU's log, to say why it failed.
func criuLogTail(dir, name string) string {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	var errs []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "Error") || strings.Contains(line, "error") {
			errs = append(errs, line)
		}
	}
	if len(errs) > 8 {
		errs = errs[len(errs)-8:]
	}
	if len(errs) == 0 {
		return ""
	}
	return "\ncriu (" + filepath.Join(dir, name) + "):\n" + strings.Join(errs, "\n")
}
