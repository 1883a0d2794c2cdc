package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx/console"
	"github.com/sbxrun/sbx/render"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/openhands"
)

// openhandsFlags configure the OpenHands Runtime API of sbx serve and the
// Agent Server of sbx openhands up (docs/openhands.md).
type openhandsFlags struct {
	openhands.ServeOptions
}

// registerCommon registers the flags sbx serve and sbx openhands up share,
// with prefix ("openhands-" for serve).
func registerOpenHandsSettings(fs *pflag.FlagSet, prefix string, f *openhands.Settings) {
	fs.StringArrayVar(&f.Aliases, prefix+"alias", nil, "map images before they are pulled: PATTERN=IMAGE, * matches anything (repeatable; e.g. 'ghcr.io/openhands/agent-server:*=agent:local')")
	fs.StringVar(&f.AgentTree, prefix+"agent-tree", "", "host directory with a self-contained Agent Server tree, mounted read-only at /agent-server in images matching --"+prefix+"tree-image")
	fs.StringArrayVar(&f.TreeImages, prefix+"tree-image", nil, "image PATTERN that gets the Agent Server tree (repeatable)")
	fs.StringVar(&f.Memory, prefix+"memory", "4g", "memory limit of a runtime (times resource_factor)")
	fs.Float64Var(&f.CPUs, prefix+"cpus", 0, "CPU quota of a runtime (times resource_factor; 0: none)")
	fs.Int64Var(&f.Pids, prefix+"pids-limit", 4096, "process limit of a runtime (times resource_factor)")
	fs.StringVar(&f.Egress, prefix+"egress", "", "egress of the runtimes' bridge network: CIDRs and host names (see --egress of sbx create) or none (default: the internet, no private ranges)")
	fs.StringArrayVar(&f.Env, prefix+"env", nil, "KEY=VALUE added to every Agent Server's environment (repeatable)")
}

// registerServe registers sbx serve's --openhands-* flags.
func (f *openhandsFlags) registerServe(fs *pflag.FlagSet) {
	fs.StringVar(&f.Listen, "openhands-listen", "", "serve the OpenHands Runtime API on this TCP address (runtime URLs <public>/<runtime_id>: for the app server)")
	fs.StringVar(&f.PortListen, "openhands-port-listen", "", "serve the OpenHands Runtime API on this TCP address with a port of its own per runtime on the same host address (for the SDK's APIRemoteWorkspace)")
	fs.StringVar(&f.KeyFile, "openhands-key-file", "", "file holding the key Runtime API clients send as X-API-Key (required with --openhands-listen)")
	fs.StringVar(&f.PublicHost, "openhands-public-host", "", "host name or address clients reach the Runtime API at, for runtime URLs (default: the listen address)")
	fs.BoolVar(&f.RotateKeyOnResume, "openhands-rotate-key-on-resume", false, "give a resumed runtime a new session key")
	fs.IntVar(&f.WarmSize, "openhands-warm", 0, "dormant Agent Servers each warm shape keeps booted for starts that run at once (0: none; see docs/openhands.md)")
	fs.StringVar(&f.WarmFile, "openhands-warm-config", "", "JSON file of shapes to keep warm: {\"configs\": [{name, image, command, working_dir, environment, size, ...}]}")
	fs.IntVar(&f.WarmLearn, "openhands-warm-learn", 1, "shapes of recent starts kept warm besides (with --openhands-warm)")
	registerOpenHandsSettings(fs, "openhands-", &f.Settings)
}

// openhandsCmd is sbx openhands: OpenHands' helpers.
func openhandsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "openhands",
		Short: "Run OpenHands Agent Servers in sandboxes (see docs/openhands.md)",
		Long: `OpenHands runs its agents in an Agent Server. sbx serve --openhands-listen
serves the Remote Runtime API that OpenHands' SDK and app server use; sbx
openhands up starts one Agent Server for a client that talks to one directly
(Agent Canvas).`,
	}
	cmd.AddCommand(openhandsUpCmd(a))
	return cmd
}

func openhandsUpCmd(a *app) *cobra.Command {
	f := &openhands.UpFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "up [--image IMAGE] [--port 8000] [--name NAME]",
		Short: "Start one Agent Server in a sandbox and print its URL and key",
		Long: `Start one OpenHands Agent Server in a new sandbox (bridge network with egress
to the internet for the LLM) with its port published on the host, wait until
it answers, and print the URL and session key that Agent Canvas asks for.
The sandbox keeps running: remove it with sbx rm -f NAME.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			host, err := a.localHost(cmd, sandbox.HostConfig{})
			if err != nil {
				return err
			}
			o, err := f.Options(slog.Default())
			if err != nil {
				return exitErr("%v", err)
			}
			be, err := host.WithPolicy(f.Policy())
			if err != nil {
				return exitErr("%v", err)
			}
			ctx, cancel := console.SignalContext()
			defer cancel()
			o.WarmPools = be
			res, err := openhands.Up(ctx, be, o)
			if err != nil {
				return sbxError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return render.JSON(out, res)
			}
			fmt.Fprintf(out, "Agent Server URL: %s\nSession API key:  %s\nSandbox:          %s (sbx rm -f %s removes it)\n", res.URL, res.Key, res.Name, res.Name)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.Image, "image", openhands.DefaultImage, "the Agent Server image (or any image, with --agent-tree and --tree-image)")
	fs.StringVar(&f.Name, "name", "", "sandbox name (default openhands-XXXXXXXX)")
	fs.StringVar(&f.Address, "address", "127.0.0.1", "host address the Agent Server's port is published on")
	fs.IntVarP(&f.Port, "port", "p", 8000, "host port the Agent Server is published on")
	fs.StringVarP(&f.WorkingDir, "workdir", "w", "/workspace", "working directory of the Agent Server (created when missing)")
	fs.StringVarP(&f.User, "user", "u", "", "UID[:GID] the Agent Server runs as (default: the image's user)")
	fs.StringVar(&f.KeyFile, "key-file", "", "file holding the session key (default: a random one)")
	fs.StringVar(&f.Pull, "pull", "IfNotPresent", "image pull policy: Always, IfNotPresent or Never")
	fs.DurationVar(&f.Timeout, "timeout", 10*time.Minute, "how long the pull and the start may take")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.IntVar(&f.Warm, "warm", 0, "also keep N dormant Agent Servers of this shape in a warm pool for later ups (filled by sbx serve or sbx pool fill)")
	registerOpenHandsSettings(fs, "", &f.Settings)
	return cmd
}
