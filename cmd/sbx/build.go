package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/dockerargs"
	"github.com/sbxrun/sbx/render"
)

func buildCmd(a *app) *cobra.Command {
	var o sbx.BuildOptions
	var buildArgs, secrets, ssh []string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "build [flags] CONTEXT",
		Short: "Build an image from a Dockerfile",
		Long:  "Build an image from CONTEXT/Dockerfile as docker build does, each RUN in a throw-away\nsandbox, each step cached by its inputs (see docs/images.md).",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ContextDir = args[0]
			var err error
			if o.BuildArgs, err = dockerargs.ParseBuildArgs(buildArgs); err != nil {
				return exitErr("%v", err)
			}
			if o.Secrets, err = dockerargs.ParseSecrets(secrets); err != nil {
				return exitErr("%v", err)
			}
			if o.SSH, err = dockerargs.ParseSSH(ssh); err != nil {
				return exitErr("%v", err)
			}
			if !quiet {
				o.Output = cmd.ErrOrStderr()
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				builder, ok := b.(sbx.Builder)
				if !ok {
					return errors.New("this backend cannot build images")
				}
				res, err := builder.Build(ctx, o)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), res.Image.Digest)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Tag, "tag", "t", "", "name the image NAME[:TAG]")
	f.StringVarP(&o.Dockerfile, "file", "f", "", "the Dockerfile (default CONTEXT/Dockerfile)")
	f.StringArrayVar(&buildArgs, "build-arg", nil, "set an ARG: KEY=VALUE (KEY alone takes it from the environment)")
	f.StringArrayVar(&secrets, "secret", nil, "a secret for RUN --mount=type=secret: id=ID,src=FILE or id=ID,env=VAR")
	f.StringArrayVar(&ssh, "ssh", nil, "an ssh agent for RUN --mount=type=ssh: default (or ID: $SSH_AUTH_SOCK) or ID=SOCKET")
	f.StringVar(&o.Target, "target", "", "build this stage (and the stages it needs) only")
	f.BoolVar(&o.NoCache, "no-cache", false, "build every step again")
	f.StringVar(&o.Network, "network", sbx.NetworkNone, "network of RUN steps: none or bridge")
	f.StringVar(&o.Pull, "pull", "", "pull policy of FROM images: missing, always or never (default: the host's)")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the image digest")
	cmd.AddCommand(buildPruneCmd(a))
	return cmd
}

func buildPruneCmd(a *app) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "prune [-f]",
		Short: "Remove the build cache: the step images (sbx-build:*) and the RUN cache mounts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				if !console.IsTerminal(cmd.InOrStdin()) {
					return exitErr("sbx build prune removes the build cache: confirm with -f")
				}
				if !console.Confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), "This removes the build cache. Continue?") {
					return exitWith(1)
				}
			}
			return a.withBackend(func(ctx context.Context, b backend) error {
				p, ok := b.(sbx.BuildCachePruner)
				if !ok {
					return errors.New("this backend cannot prune a build cache: run sbx build prune on the server's host")
				}
				rep, err := p.PruneBuildCache(ctx)
				if rep != nil {
					render.BuildPruneReport(cmd.OutOrStdout(), rep)
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "do not ask for confirmation")
	return cmd
}
