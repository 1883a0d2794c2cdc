package sbx_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
)

// heldLogs is a backend holding a fixed output window: the frames of Logs
// from Since on, then the end frame at the window's end.
type heldLogs struct {
	sbx.Sandboxes
	frames []sbx.LogFrame
	calls  []sbx.LogOptions
}

func (h *heldLogs) Logs(ctx context.Context, ref string, o sbx.LogOptions, fn func(sbx.LogFrame) error) error {
	h.calls = append(h.calls, o)
	var end int64
	for _, f := range h.frames {
		if f.Offset >= o.Since {
			if err := fn(f); err != nil {
				return err
			}
		}
		end = f.Offset + int64(len(f.Data))
	}
	return fn(sbx.LogFrame{Type: sbx.LogEnd, Offset: end})
}

func TestTailLogs(t *testing.T) {
	h := &heldLogs{frames: []sbx.LogFrame{
		{Type: sbx.LogGap, Lost: 10, Offset: 10},
		{Type: sbx.LogStdout, Data: "a\nb\n", Offset: 10},
		{Type: sbx.LogStderr, Data: "c\n", Offset: 14},
		{Type: sbx.LogStdout, Data: "d\n", Offset: 16},
	}}
	read := func(tail int, follow bool) string {
		h.calls = nil
		var b strings.Builder
		err := sbx.TailLogs(context.Background(), h, "x", tail, follow, func(f sbx.LogFrame) error {
			if f.Type == sbx.LogEnd {
				t.Error("fn got the end frame")
			}
			b.WriteString(f.Type + ":" + f.Data + ";")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := read(-1, false); got != "gap:;stdout:a\nb\n;stderr:c\n;stdout:d\n;" || len(h.calls) != 1 {
		t.Errorf("all: %q (%d calls)", got, len(h.calls))
	}
	if got := read(2, false); got != "stderr:c\n;stdout:d\n;" || len(h.calls) != 1 {
		t.Errorf("tail 2: %q", got)
	}
	// Following after the tail resumes at the window's end: nothing twice.
	if got := read(3, true); got != "stdout:b\n;stderr:c\n;stdout:d\n;" || len(h.calls) != 2 || h.calls[1] != (sbx.LogOptions{Since: 18, Follow: true}) {
		t.Errorf("tail 3 -f: %q, calls %+v", got, h.calls)
	}
	if got := read(0, false); got != "" {
		t.Errorf("tail 0: %q", got)
	}
}
