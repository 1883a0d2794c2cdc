package main

import (
	"github.com/spf13/cobra"

	"github.com/sbxrun/sbx/sandbox"
)

// imageFlags are the options of commands that pull or import: they
// configure this host's image cache, and a server has its own.
type imageFlags struct {
	platform string
	insecure []string
	quiet    bool
}

func (f *imageFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.platform, "platform", "", "platform to pick from multi-arch images (os/arch[/variant]); default the host's")
	cmd.Flags().StringArrayVar(&f.insecure, "insecure-registry", nil, "registry host[:port] to reach over plain HTTP (repeatable; localhost and 127.0.0.1 always are)")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "print no progress")
}

// hostConfig is the host configuration the flags ask for; with --host
// they are refused, since the server pulls with its own options.
func (f *imageFlags) hostConfig(a *app, cmd *cobra.Command) (sandbox.HostConfig, error) {
	if a.host != "" {
		for _, n := range []string{"platform", "insecure-registry"} {
			if cmd.Flags().Changed(n) {
				return sandbox.HostConfig{}, exitErr("--%s is not supported with --host: the server pulls with its own options (start sbx serve with --insecure-registry, or pull on the server host with sbx pull --%s)", n, n)
			}
		}
	}
	return sandbox.HostConfig{Platform: f.platform, InsecureRegistries: f.insecure}, nil
}
