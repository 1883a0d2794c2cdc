package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx/executor/api"
)

func TestMainCmdLogsRefuseHostileReplies(t *testing.T) {
	ctx := context.Background()
	// A frame longer than the cap.
	c := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"type":"stdout","data":"%s"}`+"\n", strings.Repeat("x", 1<<20))
	})
	if _, err := c.MainCmdLogs(ctx, LogOptions{TailBytes: -1}, func(api.LogFrame) error { return nil }); !errors.Is(err, ErrReplyTooLarge) {
		t.Errorf("huge frame: %v", err)
	}
	// Endless small frames for a tail of 100 bytes.
	c = hostile(t, func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 1e6 && r.Context().Err() == nil; i++ {
			fmt.Fprintf(w, `{"type":"stdout","offset":%d,"data":"%s"}`+"\n", i*1000, strings.Repeat("y", 1000))
		}
	})
	if _, _, err := c.MainCmdLogTail(ctx, 100); !errors.Is(err, ErrReplyTooLarge) {
		t.Errorf("endless tail: %v", err)
	}
	// A stream that stops without its end frame, an unknown frame type.
	c = hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"type":"stdout","data":"a"}`)
	})
	if _, err := c.MainCmdLogs(ctx, LogOptions{TailBytes: -1}, func(api.LogFrame) error { return nil }); err == nil {
		t.Error("stream without end frame: no error")
	}
	c = hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, `{"type":"exec","data":"a"}`)
	})
	if _, err := c.MainCmdLogs(ctx, LogOptions{TailBytes: -1}, func(api.LogFrame) error { return nil }); err == nil || !strings.Contains(err.Error(), "unknown frame") {
		t.Errorf("unknown frame: %v", err)
	}
	// A wait that never answers is bounded by the caller's deadline.
	c = hostile(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.WaitMainCmd(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stuck wait: %v", err)
	}
	// A status larger than its cap.
	c = hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"state":"running","argv":["%s"]}`, strings.Repeat("z", 2<<20))
	})
	if _, err := c.MainCmd(ctx); !errors.Is(err, ErrReplyTooLarge) {
		t.Errorf("huge status: %v", err)
	}
}
