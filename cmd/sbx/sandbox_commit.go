package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/sandbox"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "commit ID NAME",
		Short: "Store a sandbox's writable layer as a new image NAME in the image cache",
		Long: `Store the sandbox's writable layer as a new layer on top of its image, as a new
image NAME in the image cache: sandboxes created from NAME (sbx create NAME,
sbx run NAME) start with that state at once. A running sandbox is paused
while its layer is read.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			if remoteHost != "" {
				c, err := remoteClient()
				if err != nil {
					return sbxError(err)
				}
				img, err := c.CommitSandbox(ctx, args[0], args[1])
				if err != nil {
					return sbxError(remoteErr(err))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", img.Name, img.Digest)
				return nil
			}
			m, err := openManager()
			if err != nil {
				return sbxError(err)
			}
			img, err := m.Commit(ctx, args[0], args[1])
			if err != nil {
				return sbxError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", img.Ref, img.Digest)
			return nil
		},
	})

	o := &createOptions{}
	var script, scriptFile string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "prepare [flags] BASE (-c SCRIPT | --script FILE)",
		Short: "Build (once) an image from a base image plus a setup script, cached by their hash",
		Long: `Run a setup script in a throw-away sandbox created from BASE and store the
result as an image named sbx-prepared:<hash>, where the hash covers BASE's
digest, the script, and the environment, user, working directory and network
it ran with. The next prepare with the same inputs finds the image in the
cache and returns at once. Prints the image name; create sandboxes from it
with sbx create NAME. The script's output goes to stderr.

The sandbox flags of sbx create apply to the build sandbox (--network host
lets the script download packages).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (script == "") == (scriptFile == "") {
				return &exitError{code: exitSbxFailed, msg: "give the setup script with exactly one of -c SCRIPT and --script FILE"}
			}
			if scriptFile != "" {
				data, err := os.ReadFile(scriptFile)
				if err != nil {
					return &exitError{code: exitSbxFailed, msg: fmt.Sprintf("read --script: %v", err)}
				}
				script = string(data)
			}
			opts, err := o.options(args)
			if err != nil {
				return &exitError{code: exitSbxFailed, msg: err.Error()}
			}
			if remoteHost != "" {
				return remotePrepare(cmd, args[0], script, opts, quiet)
			}
			m, err := openManager()
			if err != nil {
				return sbxError(err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			po := sandbox.PrepareOptions{Base: args[0], Script: script, Sandbox: opts}
			if !quiet {
				po.Output = cmd.ErrOrStderr()
			}
			img, cached, err := m.Prepare(ctx, po)
			if err != nil {
				return sbxError(err)
			}
			if cached && !quiet {
				fmt.Fprintln(cmd.ErrOrStderr(), "sbx: prepared image found in the cache")
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.TrimSpace(img.Ref))
			return nil
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVarP(&script, "command", "c", "", "the setup script, run with /bin/sh -c")
	f.StringVar(&scriptFile, "script", "", "a file holding the setup script")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not show the script's output")
	rootCmd.AddCommand(cmd)
}
