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

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Prepare returns an image that is o.Base after o.Script ran in it,
// building it only once: the image is named after a hash of the base
// image's digest, the script and the options that can change its outcome,
// so a second call with the same inputs finds it in the cache (Cached is
// then true). The build runs in a throw-away sandbox (created under the
// host's policy) and commits its writable layer. Concurrent identical
// preparations wait for each other instead of building twice.
func (h *Host) Prepare(ctx context.Context, o sbx.PrepareOptions) (*sbx.PrepareResult, error) {
	return h.prepare(ctx, o, h.cfg.Policy)
}

func (h *Host) prepare(ctx context.Context, o sbx.PrepareOptions, policy *sbx.Policy) (_ *sbx.PrepareResult, err error) {
	if o.Base == "" || strings.TrimSpace(o.Script) == "" {
		return nil, fmt.Errorf("%w: prepare needs a base image and a script", sbx.ErrInvalid)
	}
	if len(o.Sandbox.Secrets) > 0 {
		return nil, fmt.Errorf("%w: a preparation's image must not depend on secrets; give them to the sandboxes created from it", sbx.ErrInvalid)
	}
	if len(o.Sandbox.Volumes) > 0 {
		return nil, fmt.Errorf("%w: volumes would make a preparation depend on host files; copy them in within the script instead", sbx.ErrInvalid)
	}
	store, err := h.imageStore()
	if err != nil {
		return nil, err
	}
	so := o.Sandbox
	so.Image, so.Rootfs, so.Name, so.TTL, so.Cmd = o.Base, "", "", 0, nil
	base, release, err := h.resolveRoot(ctx, &so, nil)
	release()
	if err != nil {
		return nil, err
	}
	name := sbx.PreparedPrefix + ":" + prepareKey(base.info.Digest, o)
	// One build per key at a time, across processes.
	lockDir := filepath.Join(h.store.Root(), "prepare")
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := state.LockFile(ctx, filepath.Join(lockDir, strings.TrimPrefix(name, sbx.PreparedPrefix+":")+".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if img, err := store.Resolve(name); err == nil {
		return &sbx.PrepareResult{Image: *contractImage(img, false), Cached: true}, nil
	}
	so.Image = base.info.Digest
	if so.Labels == nil {
		so.Labels = map[string]string{}
	}
	so.Labels["sbx.prepare"] = name
	sb, err := h.create(ctx, so, policy, "")
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	defer func() {
		if rerr := h.Remove(context.WithoutCancel(ctx), sb.ID, sbx.RemoveOptions{Force: true}); rerr != nil && err == nil {
			err = rerr
		}
	}()
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	var tail strings.Builder
	res, err := h.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"/bin/sh", "-c", o.Script}}, func(f sbx.ExecFrame) error {
		if f.Type == sbx.FrameStdout || f.Type == sbx.FrameStderr {
			if tail.Len() < 4096 {
				tail.WriteString(f.Data)
			}
			_, err := io.WriteString(out, f.Data)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("prepare: run the script: %w", err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		return nil, fmt.Errorf("prepare: the script exited with %d:\n%s", res.ExitCode, strings.TrimSpace(tail.String()))
	}
	img, err := h.Commit(ctx, sb.ID, name)
	if err != nil {
		return nil, err
	}
	return &sbx.PrepareResult{Image: *img}, nil
}

// prepareKey hashes what decides the outcome of a preparation.
func prepareKey(digest string, o sbx.PrepareOptions) string {
	h := sha256.New()
	inputs, _ := json.Marshal(struct {
		Base, Script, User, Workdir, Network string
		Env                                  []string
	}{digest, o.Script, o.Sandbox.User, o.Sandbox.Workdir, o.Sandbox.Network, o.Sandbox.Env})
	h.Write(inputs)
	return hex.EncodeToString(h.Sum(nil))[:32]
}
