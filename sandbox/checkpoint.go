package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
	"github.com/sbxrun/sbx/sandbox/state"
)

// criuWorkDir holds CRIU's logs of a sandbox's last dump and restore,
// below its runtime directory.
const criuWorkDir = "criu"

// criuTools caches FindCRIU per configured path for the process.
var criuTools struct {
	sync.Mutex
	found map[string]isolate.CRIU
}

// criu returns the CRIU checkpoints run, made the one this process runs
// (isolate.UseCRIU), or why there is none.
func (h *Host) criu() (isolate.CRIU, error) {
	criuTools.Lock()
	defer criuTools.Unlock()
	conf := h.cfg.CRIU
	if conf == "" {
		conf = os.Getenv("SBX_CRIU")
	}
	c, ok := criuTools.found[conf]
	if !ok {
		c = isolate.FindCRIU(conf)
		if criuTools.found == nil {
			criuTools.found = map[string]isolate.CRIU{}
		}
		criuTools.found[conf] = c
	}
	if c.Err != nil {
		return c, fmt.Errorf("%w: checkpoints need CRIU: %w", sbx.ErrUnsupported, c.Err)
	}
	if err := isolate.UseCRIU(c, filepath.Join(h.store.RunRoot(), "criu-bin")); err != nil {
		return c, err
	}
	return c, nil
}

// checkpointable says why sb cannot be checkpointed, if it cannot.
func checkpointable(sb *sbx.Sandbox) error {
	switch {
	case sb.Options.Network == sbx.NetworkHost:
		return fmt.Errorf("%w: sandbox %s shares the host's network namespace, which a checkpoint cannot hold", sbx.ErrUnsupported, sb.ShortID())
	case sb.Image == nil && sb.Options.Rootfs == "":
		return fmt.Errorf("%w: sandbox %s runs on the host's root (host mode), which a checkpoint cannot hold", sbx.ErrUnsupported, sb.ShortID())
	case sb.Options.UserNS == sbx.UserNSPrivate:
		return fmt.Errorf("%w: sandbox %s runs in a private user namespace (the default), which checkpoints do not support: create it with --userns host (\"userns\": \"host\") to checkpoint, fork, stop --checkpoint or idle-checkpoint it", sbx.ErrUnsupported, sb.ShortID())
	case len(sb.Options.Volumes) > 0:
		return fmt.Errorf("%w: sandbox %s has volumes: host directories are not part of a checkpoint", sbx.ErrUnsupported, sb.ShortID())
	}
	return nil
}

// Checkpoint writes a running sandbox's processes, writable layer and
// record to a new snapshot. Without o.LeaveRunning the sandbox is stopped
// afterwards and Start resumes it from the snapshot.
func (h *Host) Checkpoint(ctx context.Context, ref string, o sbx.CheckpointOptions) (*sbx.Snapshot, error) {
	c, err := h.criu()
	if err != nil {
		return nil, err
	}
	l, sb, err := h.lock(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	h.refresh(l, sb)
	if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
		return nil, fmt.Errorf("%w: sandbox %s is %s; only a running sandbox can be checkpointed", sbx.ErrState, sb.ShortID(), sb.Status)
	}
	if err := checkpointable(sb); err != nil {
		return nil, err
	}
	name := o.Snapshot
	if name == "" {
		name = snapshotDefaultName(sb, h.now().UnixNano())
	}
	if err := sbx.ValidSnapshotName(name); err != nil {
		return nil, err
	}
	snap, err := h.checkpointAs(ctx, sb, name, o.LeaveRunning, false, c)
	if err != nil {
		return nil, err
	}
	if !o.LeaveRunning {
		sb.Checkpoint = name
		if err := h.markStopped(l, sb); err != nil {
			return nil, fmt.Errorf("sandbox %s was checkpointed to %s, but its record could not say so: %w", sb.ShortID(), name, err)
		}
	}
	return snap, nil
}

// checkpointAs dumps sb (locked, running) into a new snapshot called
// name; stop marks it as made for the next start alone.
func (h *Host) checkpointAs(ctx context.Context, sb *sbx.Sandbox, name string, leave, stop bool, c isolate.CRIU) (*sbx.Snapshot, error) {
	p, err := h.newPartialSnapshot(name)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			p.discard()
		}
	}()
	snap := &sbx.Snapshot{
		Name: name, Format: sbx.SnapshotFormat, Created: h.now().UTC(),
		SourceID: sb.ID, SourceName: sb.Name, Options: sb.Options, Image: sb.Image,
		Hostname: hostname(sb), CRIUVersion: c.VersionString(),
	}
	snap.Options.Name, snap.Options.TTL, snap.Options.IdleTimeout = "", 0, 0
	executor, err := h.executorBinary()
	if err != nil {
		return nil, err
	}
	ri, err := h.dump(ctx, sb, p.dir, leave, snap)
	if err != nil {
		return nil, err
	}
	ri.Stop, ri.Executor = stop, filepath.Base(executor)
	data, err := json.Marshal(ri)
	if err != nil {
		return nil, err
	}
	if err := writeFileSync(filepath.Join(p.dir, restoreFile), data); err != nil {
		return nil, fmt.Errorf("write the snapshot: %w", err)
	}
	if err := h.commitSnapshot(p, snap); err != nil {
		return nil, err
	}
	committed = true
	return snap, nil
}

// dump checkpoints sb's processes into dir/criu and its writable layer
// into dir/layer.tar. The executor lets go of the host's listening socket
// first; if the sandbox runs on afterwards (leave, or a failed dump) it
// gets a new one.
func (h *Host) dump(ctx context.Context, sb *sbx.Sandbox, dir string, leave bool, snap *sbx.Snapshot) (*restoreInfo, error) {
	cl := client.New(sb.Socket, client.Options{})
	placeholder, err := cl.PrepareCheckpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare the executor of sandbox %s for the checkpoint: %w", sb.ShortID(), err)
	}
	pid := sb.Pid
	dumped := false
	work := filepath.Join(h.store.RunDir(sb.ID), criuWorkDir)
	err = h.inMountNS(sb.ID, func() error {
		ctr, err := h.container(sb)
		if err != nil {
			return err
		}
		if pid = ctr.Pid(); pid <= 0 {
			return fmt.Errorf("sandbox %s is not running", sb.ShortID())
		}
		if leave && ctr.Status() != "paused" {
			// Frozen from the dump to the end of the layer's copy, so that
			// the files match the processes' view of them.
			if err := ctr.Pause(); err != nil {
				return fmt.Errorf("pause sandbox %s: %w", sb.ShortID(), err)
			}
			defer func() { _ = ctr.Resume() }()
		}
		t0 := time.Now()
		err = ctr.Checkpoint(isolate.CheckpointOptions{ImageDir: filepath.Join(dir, criuImagesDir), WorkDir: work, LeaveRunning: leave})
		if err != nil {
			return explainDumpError(err)
		}
		dumped = true
		t1 := time.Now()
		snap.DumpS = t1.Sub(t0).Seconds()
		err = tarLayer(rootfs.UpperDir(filepath.Join(h.store.RunDir(sb.ID), rootfsDir)), filepath.Join(dir, layerFile))
		snap.LayerS = time.Since(t1).Seconds()
		return err
	})
	if leave || !dumped {
		if herr := h.handover(ctx, pid, placeholder, h.store.RunDir(sb.ID)); herr != nil {
			err = errors.Join(err, fmt.Errorf("give the executor its socket back: %w", herr))
		}
	}
	if err != nil {
		if dumped && !leave {
			return nil, fmt.Errorf("checkpoint sandbox %s: its processes were dumped and have ended, but the snapshot could not be completed (start it anew with sbx start): %w", sb.ShortID(), err)
		}
		return nil, fmt.Errorf("checkpoint sandbox %s: %w", sb.ShortID(), err)
	}
	return &restoreInfo{Placeholder: placeholder}, nil
}

// explainDumpError adds what to do to CRIU's most common refusals.
func explainDumpError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "External socket is used") || strings.Contains(msg, "half of stream unix connection"):
		return fmt.Errorf("%w\n(a client is connected to the sandbox's executor: an exec, attach or session call in progress; retry when it ends)", err)
	case strings.Contains(msg, "Can't get rlimit"):
		return fmt.Errorf("%w\n(a process of the sandbox runs as a user or group other than root, and CRIU needs CAP_SYS_RESOURCE, which this host lacks, to read its limits; only sandboxes whose processes run as root can be checkpointed here)", err)
	case strings.Contains(msg, "No space left"):
		return fmt.Errorf("%w\n(the disk holding sbx's root is full)", err)
	}
	return err
}

// tarLayer writes the writable layer upper to dst with GNU tar: owners,
// modes, xattrs (overlay's opaque markers among them) and whiteouts (0/0
// character devices) are kept. It runs where the layer is mounted.
func tarLayer(upper, dst string) error {
	return runTar("copy the writable layer", "--create", "--file", dst, "--directory", upper, "--sparse", "--one-file-system", ".")
}

// untarLayer extracts a layer written by tarLayer into upper.
func untarLayer(src, upper string) error {
	return runTar("restore the writable layer", "--extract", "--file", src, "--directory", upper,
		"--same-owner", "--same-permissions", "--no-overwrite-dir")
}

func runTar(what string, args ...string) error {
	out, err := exec.Command("tar", append([]string{"--numeric-owner", "--xattrs", "--xattrs-include=*"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s (tar): %w: %s", what, err, strings.TrimSpace(string(tail(out, 500))))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// handover creates the executor's listening socket at sock again and hands
// it, with the executor's log in the runtime directory run, to the
// executor of the sandbox whose PID 1 is pid, which waits on the
// placeholder (an abstract socket of its network namespace).
func (h *Host) handover(ctx context.Context, pid int, placeholder, run string) error {
	sock := filepath.Join(run, socketDir, socketName)
	out, err := openExecutorOutput(run)
	if err != nil {
		return fmt.Errorf("executor log: %w", err)
	}
	defer out.close()
	_ = os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen on executor socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	f, err := ln.File()
	_ = ln.Close()
	if err != nil {
		return err
	}
	defer f.Close()
	var conn *net.UnixConn
	err = netns.InNamespacePath("/proc/"+strconv.Itoa(pid)+"/ns/net", func() error {
		var err error
		conn, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: placeholder, Net: "unix"})
		return err
	})
	if err != nil {
		return fmt.Errorf("reach the executor's placeholder socket: %w", err)
	}
	defer conn.Close()
	return client.Handover(ctx, conn, f, out.W)
}

// stopCheckpoint stops sb (locked, running) by checkpointing it into a
// snapshot that Start resumes from (and then removes); idle marks it as
// stopped by its idle timeout, which the next use undoes.
func (h *Host) stopCheckpoint(ctx context.Context, l *state.Lock, sb *sbx.Sandbox, idle bool) (*sbx.Sandbox, error) {
	c, err := h.criu()
	if err != nil {
		return nil, err
	}
	if err := checkpointable(sb); err != nil {
		return nil, err
	}
	name := "stop-" + snapshotDefaultName(sb, h.now().UnixNano())
	if _, err := h.checkpointAs(ctx, sb, name, false, true, c); err != nil {
		return nil, err
	}
	sb.Checkpoint, sb.Idle = name, idle
	if err := h.markStopped(l, sb); err != nil {
		return nil, fmt.Errorf("sandbox %s was checkpointed to %s, but its record could not say so: %w", sb.ShortID(), name, err)
	}
	return sb, nil
}

// checkpointSupport says whether checkpoints work on this host and with
// which CRIU, or why not (for Info).
func (h *Host) checkpointSupport(ctx context.Context) string {
	c, err := h.criu()
	if err != nil {
		return "no: " + err.Error()
	}
	if err := c.Check(ctx); err != nil {
		return "no: CRIU " + c.VersionString() + " at " + c.Path + " fails its check: " + err.Error()
	}
	return "yes: CRIU " + c.VersionString() + " at " + c.Path
}
