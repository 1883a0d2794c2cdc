package sbx

import "context"

// TailLogs reads the output of a sandbox's main command as docker logs
// shows it: what s holds (only its last tail lines when tail >= 0), then
// with follow what comes after, resuming at the offset where the first
// read ended so that nothing is shown twice. fn gets the stdout, stderr
// and gap frames in order, never the end frame.
func TailLogs(ctx context.Context, s Sandboxes, ref string, tail int, follow bool, fn func(LogFrame) error) error {
	var since int64
	if tail >= 0 {
		var held []LogFrame
		err := s.Logs(ctx, ref, LogOptions{}, func(f LogFrame) error {
			if f.Type == LogEnd {
				since = f.Offset
				return nil
			}
			if f.Type == LogStdout || f.Type == LogStderr {
				held = append(held, f)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, f := range LastLines(held, tail) {
			if err := fn(f); err != nil {
				return err
			}
		}
		if !follow {
			return nil
		}
	}
	return s.Logs(ctx, ref, LogOptions{Since: since, Follow: follow}, func(f LogFrame) error {
		if f.Type == LogEnd {
			return nil
		}
		return fn(f)
	})
}
