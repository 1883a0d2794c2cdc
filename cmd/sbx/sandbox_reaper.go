package main

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/sandbox"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:    "ttl-reaper",
		Short:  "Remove sandboxes as their --ttl passes; exits when none has one (started by sbx create)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := openManager()
			if err != nil {
				return sbxError(err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			_, err = m.RunExpiryReaper(ctx)
			if ctx.Err() != nil {
				return nil
			}
			return sbxError(err)
		},
	})
}

// startExpiryReaper starts `sbx ttl-reaper` in the background, detached from
// this process and its terminal, unless one already runs. It removes each
// sandbox when its TTL passes and exits when no sandbox has one.
func startExpiryReaper(m *sandbox.Manager) {
	if m.ExpiryReaperRunning() {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer devnull.Close()
	cmd := exec.Command(exe, "--root", global.root, "--run-root", global.runRoot, "--log-level", global.logLevel, "ttl-reaper")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		_ = cmd.Process.Release()
	}
}
