package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/tests/fixture"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestRefusalsAreErrInvalid: what a sandbox's own files refuse is the
// contract's sbx.ErrInvalid, locally and through the REST server alike.
// A cold create whose user the root lacks fails before its executor
// starts, naming the user and the root, and leaves nothing behind (the
// env's cleanup checks); an exec as a user the sandbox lacks (the
// executor's 400 reply) is ErrInvalid too.
func TestRefusalsAreErrInvalid(t *testing.T) {
	fixture.BusyboxRootfs(t)
	e := harness.NewServerEnv(t, sandbox.HostConfig{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, b := range []struct {
		name string
		b    sbx.Sandboxes
	}{{"host", e.Host}, {"client", e.C}} {
		t.Run(b.name, func(t *testing.T) {
			o := harness.BusyboxCreate("")
			o.User = "nosuchuser"
			sb, err := b.b.Create(ctx, o)
			if sb != nil {
				e.See(sb.ID)
			}
			if !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), `user "nosuchuser"`) || !strings.Contains(err.Error(), "rootfs "+o.Rootfs) {
				t.Fatalf("create as a user the rootfs lacks: %v, want sbx.ErrInvalid naming the user and the rootfs", err)
			}
			if list, err := b.b.List(ctx, sbx.Filter{}); err != nil || len(list) != 0 {
				t.Fatalf("after the refused create: %d sandboxes (%v)", len(list), err)
			}

			sb, err = b.b.Create(ctx, harness.BusyboxCreate(""))
			if err != nil {
				t.Fatal(err)
			}
			e.See(sb.ID)
			defer func() { _ = b.b.Remove(context.Background(), sb.ID, sbx.RemoveOptions{Force: true}) }()
			_, err = b.b.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"true"}, User: "nosuch2"}, nil)
			if !errors.Is(err, sbx.ErrInvalid) || !strings.Contains(err.Error(), "nosuch2") {
				t.Fatalf("exec as a user the sandbox lacks: %v, want sbx.ErrInvalid", err)
			}
			_, err = b.b.Exec(ctx, sb.ID, sbx.ExecRequest{Argv: []string{"true"}, User: "nosuch2"}, func(sbx.ExecFrame) error { return nil })
			if !errors.Is(err, sbx.ErrInvalid) {
				t.Fatalf("streamed exec as a user the sandbox lacks: %v, want sbx.ErrInvalid", err)
			}
		})
	}
}
