package sandbox

import (
	"context"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/client"
)

// CopyTo copies the host file or directory src into a running sandbox at
// dst, as docker cp does (see client.CopyTo). A relative dst is taken
// relative to the sandbox's working directory.
func (h *Host) CopyTo(ctx context.Context, ref, src, dst string) error {
	sb, done, err := h.use(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	c, _ := h.executor(sb)
	defer c.Close()
	return client.CopyTo(ctx, c, src, inSandbox(sb, dst))
}

// CopyFrom copies the file or directory src inside a running sandbox to
// dst on the host, as docker cp does (see client.CopyFrom). A relative
// src is taken relative to the sandbox's working directory.
func (h *Host) CopyFrom(ctx context.Context, ref, src, dst string) error {
	if src == "" {
		return invalid("empty sandbox path")
	}
	sb, done, err := h.use(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	c, _ := h.executor(sb)
	defer c.Close()
	return client.CopyFrom(ctx, c, inSandbox(sb, src), dst)
}

// inSandbox makes a sandbox path absolute against the sandbox's working
// directory (its option, else the image's, else /), as commands see it.
func inSandbox(sb *sbx.Sandbox, p string) string {
	wd := sb.Options.Workdir
	if wd == "" && sb.Image != nil {
		wd = sb.Image.Workdir
	}
	return client.InDir(wd, p)
}
