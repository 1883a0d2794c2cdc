package dockerargs

import (
	"context"

	"github.com/sbxrun/sbx"
)

// RunAttached is docker run without -d of a sandbox others see while it
// runs (RunFlags.Named): opts, with its main command, created as a
// long-lived sandbox, the command's output given to out as it comes, its
// end waited for, and the sandbox removed (also when ctx ends first,
// which kills it). It returns how the command ended.
func RunAttached(ctx context.Context, s sbx.Sandboxes, opts sbx.Options, out func(sbx.LogFrame) error) (*sbx.Exit, error) {
	opts.AutoRemove = false // removed here, once its end is read
	sb, err := s.Create(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Remove(context.WithoutCancel(ctx), sb.ID, sbx.RemoveOptions{Force: true}) }()
	if err := sbx.TailLogs(ctx, s, sb.ID, -1, true, out); err != nil {
		return nil, err
	}
	return s.Wait(ctx, sb.ID)
}
