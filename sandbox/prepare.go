package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/sandbox/state"
)

// PrepareOptions describe an environment prepared from a base image and a
// setup script.
type PrepareOptions struct {
	// Base is the image to start from.
	Base string
	// Script is run with /bin/sh -c in a sandbox created from Base.
	Script string
	// Sandbox sets how that sandbox is created (limits, network, env, user,
	// working directory, volumes are not allowed); Image and Rootfs are
	// ignored.
	Sandbox Options
	// Output receives the script's output as it runs (nil: discarded).
	Output io.Writer
}

// PreparedPrefix names the images Prepare makes: sbx-prepared:<hash>.
const PreparedPrefix = "sbx-prepared"

// Prepare returns an image that is Base after Script ran in it, building it
// only once: the image is named after a hash of the base image's digest,
// the script and the options that can change its outcome, so a second call
// with the same inputs finds it in the cache (cached is then true). The
// build runs in a throw-away sandbox and commits its writable layer.
// Concurrent identical preparations wait for each other instead of
// building twice.
func (m *Manager) Prepare(ctx context.Context, o PrepareOptions) (img *ResolvedImage, cached bool, err error) {
	if m.cfg.Images == nil {
		return nil, false, fmt.Errorf("%w: no image store configured", ErrInvalid)
	}
	if o.Base == "" || strings.TrimSpace(o.Script) == "" {
		return nil, false, fmt.Errorf("%w: prepare needs a base image and a script", ErrInvalid)
	}
	if len(o.Sandbox.Volumes) > 0 {
		return nil, false, fmt.Errorf("%w: volumes would make a preparation depend on host files; copy them in within the script instead", ErrInvalid)
	}
	base, err := m.cfg.Images.Resolve(ctx, o.Base)
	if err != nil {
		return nil, false, err
	}
	name := PreparedPrefix + ":" + prepareKey(base.Digest, o)
	// One build per key at a time, across processes.
	lockDir := filepath.Join(m.store.Root(), "prepare")
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, false, err
	}
	unlock, err := state.LockFile(ctx, filepath.Join(lockDir, strings.TrimPrefix(name, PreparedPrefix+":")+".lock"))
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if img, err := m.cfg.Images.Resolve(ctx, name); err == nil {
		return img, true, nil
	}
	so := o.Sandbox
	so.Image, so.Rootfs, so.Name, so.TTL = base.Digest, "", "", 0
	if so.Labels == nil {
		so.Labels = map[string]string{}
	}
	so.Labels["sbx.prepare"] = name
	sb, err := m.Create(ctx, so)
	if err != nil {
		return nil, false, fmt.Errorf("prepare: %w", err)
	}
	defer func() {
		if rerr := m.Remove(context.WithoutCancel(ctx), sb.ID, true); rerr != nil && err == nil {
			err = rerr
		}
	}()
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	var tail strings.Builder
	res, err := m.Exec(ctx, sb.ID, api.ExecRequest{Argv: []string{"/bin/sh", "-c", o.Script}}, func(f api.ExecFrame) error {
		if f.Type == api.FrameStdout || f.Type == api.FrameStderr {
			if tail.Len() < 4096 {
				tail.WriteString(f.Data)
			}
			_, err := io.WriteString(out, f.Data)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("prepare: run the script: %w", err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		return nil, false, fmt.Errorf("prepare: the script exited with %d:\n%s", res.ExitCode, strings.TrimSpace(tail.String()))
	}
	img, err = m.Commit(ctx, sb.ID, name)
	if err != nil {
		return nil, false, err
	}
	return img, false, nil
}

// prepareKey hashes what decides the outcome of a preparation.
func prepareKey(digest string, o PrepareOptions) string {
	h := sha256.New()
	inputs, _ := json.Marshal(struct {
		Base, Script, User, Workdir, Network string
		Env                                  []string
	}{digest, o.Script, o.Sandbox.User, o.Sandbox.Workdir, o.Sandbox.Network, o.Sandbox.Env})
	h.Write(inputs)
	return hex.EncodeToString(h.Sum(nil))[:32]
}
