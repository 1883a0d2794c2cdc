package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server"
	"github.com/sbxrun/sbx/server/openhands"
)

// openhandsFlags configure the OpenHands Runtime API of sbx serve and the
// Agent Server of sbx openhands up (docs/openhands.md).
type openhandsFlags struct {
	listen, portListen, keyFile, publicHost string
	aliases, treeImages, env                []string
	agentTree, memory, egress               string
	cpus                                    float64
	pids                                    int64
	rotateKey                               bool
}

// registerCommon registers the flags sbx serve and sbx openhands up share,
// with prefix ("openhands-" for serve).
func (f *openhandsFlags) registerCommon(fs *pflag.FlagSet, prefix string) {
	fs.StringArrayVar(&f.aliases, prefix+"alias", nil, "map images before they are pulled: PATTERN=IMAGE, * matches anything (repeatable; e.g. 'ghcr.io/openhands/agent-server:*=agent:local')")
	fs.StringVar(&f.agentTree, prefix+"agent-tree", "", "host directory with a self-contained Agent Server tree, mounted read-only at /agent-server in images matching --"+prefix+"tree-image")
	fs.StringArrayVar(&f.treeImages, prefix+"tree-image", nil, "image PATTERN that gets the Agent Server tree (repeatable)")
	fs.StringVar(&f.memory, prefix+"memory", "4g", "memory limit of a runtime (times resource_factor)")
	fs.Float64Var(&f.cpus, prefix+"cpus", 0, "CPU quota of a runtime (times resource_factor; 0: none)")
	fs.Int64Var(&f.pids, prefix+"pids-limit", 4096, "process limit of a runtime (times resource_factor)")
	fs.StringVar(&f.egress, prefix+"egress", "", "egress of the runtimes' bridge network: CIDR[,CIDR...] or none (default: the internet, no private ranges)")
	fs.StringArrayVar(&f.env, prefix+"env", nil, "KEY=VALUE added to every Agent Server's environment (repeatable)")
}

// registerServe registers sbx serve's --openhands-* flags.
func (f *openhandsFlags) registerServe(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "openhands-listen", "", "serve the OpenHands Runtime API on this TCP address (runtime URLs <public>/<runtime_id>: for the app server)")
	fs.StringVar(&f.portListen, "openhands-port-listen", "", "serve the OpenHands Runtime API on this TCP address with a port of its own per runtime on the same host address (for the SDK's APIRemoteWorkspace)")
	fs.StringVar(&f.keyFile, "openhands-key-file", "", "file holding the key Runtime API clients send as X-API-Key (required with --openhands-listen)")
	fs.StringVar(&f.publicHost, "openhands-public-host", "", "host name or address clients reach the Runtime API at, for runtime URLs (default: the listen address)")
	fs.BoolVar(&f.rotateKey, "openhands-rotate-key-on-resume", false, "give a resumed runtime a new session key")
	f.registerCommon(fs, "openhands-")
}

func (f *openhandsFlags) enabled() bool { return f.listen != "" || f.portListen != "" }

// parsed returns the settings both front-ends take from the flags.
func (f *openhandsFlags) parsed(prefix string) (aliases []openhands.Alias, limits sbx.Limits, env map[string]string, err error) {
	for _, a := range f.aliases {
		pattern, image, ok := strings.Cut(a, "=")
		if !ok || pattern == "" || image == "" {
			return nil, limits, nil, fmt.Errorf("invalid --%salias %q: want PATTERN=IMAGE", prefix, a)
		}
		aliases = append(aliases, openhands.Alias{Pattern: pattern, Image: image})
	}
	if f.memory != "" {
		if limits.MemoryBytes, err = parseSizeFlag(prefix+"memory", f.memory); err != nil {
			return nil, limits, nil, err
		}
	}
	if f.cpus < 0 || f.pids < 0 {
		return nil, limits, nil, fmt.Errorf("invalid --%scpus or --%spids-limit: want a positive number", prefix, prefix)
	}
	limits.CPUs, limits.Pids = f.cpus, f.pids
	env = map[string]string{}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, limits, nil, fmt.Errorf("invalid --%senv %q: want KEY=VALUE", prefix, kv)
		}
		env[k] = v
	}
	if f.agentTree != "" && !filepath.IsAbs(f.agentTree) {
		return nil, limits, nil, fmt.Errorf("--%sagent-tree %q must be an absolute path", prefix, f.agentTree)
	}
	return aliases, limits, env, nil
}

// backend is the Runtime API's view of host: the tree is the only host
// path its sandboxes mount, and nothing else is allowed.
func (f *openhandsFlags) backend(host *sandbox.Host) (*sandbox.PolicyView, error) {
	p := &sbx.Policy{}
	if f.agentTree != "" {
		p.AllowedHostDirs = []string{f.agentTree}
	}
	return host.WithPolicy(p)
}

// startOpenHands opens the Runtime API listeners the flags ask for over
// host; the caller serves them (Listener.Serve).
func startOpenHands(f *openhandsFlags, host *sandbox.Host, root string, log *slog.Logger) ([]*openhands.Listener, error) {
	if !f.enabled() {
		if f.keyFile != "" || f.publicHost != "" {
			return nil, errors.New("--openhands-key-file and --openhands-public-host need --openhands-listen or --openhands-port-listen")
		}
		return nil, nil
	}
	if f.keyFile == "" {
		return nil, errors.New("the OpenHands Runtime API needs a key: --openhands-key-file F (clients send it as X-API-Key)")
	}
	key, err := server.ReadToken(f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--openhands-key-file: %w", err)
	}
	aliases, limits, env, err := f.parsed("openhands-")
	if err != nil {
		return nil, err
	}
	be, err := f.backend(host)
	if err != nil {
		return nil, err
	}
	cfg := openhands.Config{
		APIKey: key, Aliases: aliases, AgentTree: f.agentTree, TreeImages: f.treeImages, BaseLimits: limits,
		Egress: f.egress, Environment: env, RotateKeyOnResume: f.rotateKey, Logger: log,
	}
	var out []*openhands.Listener
	for _, l := range []struct {
		addr, mode string
	}{{f.listen, "path"}, {f.portListen, "port"}} {
		if l.addr == "" {
			continue
		}
		cfg.StateDir = filepath.Join(root, "openhands", l.mode)
		ln, err := openhands.Listen(be, cfg, openhands.ListenOptions{Addr: l.addr, PublicHost: f.publicHost, PortMode: l.mode == "port"})
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, err
		}
		out = append(out, ln)
		log.Info("sbx serve: OpenHands Runtime API", "addr", ln.Addr().String(), "urls", l.mode, "public", ln.PublicURL())
	}
	return out, nil
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
	f := &openhandsFlags{}
	var (
		image, name, address, workdir, user, keyFile, pull string
		port                                               int
		asJSON                                             bool
		timeout                                            time.Duration
	)
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
			aliases, limits, env, err := f.parsed("")
			if err != nil {
				return exitErr("%v", err)
			}
			key := ""
			if keyFile != "" {
				if key, err = server.ReadToken(keyFile); err != nil {
					return exitErr("--key-file: %v", err)
				}
			}
			req := openhands.StartRequest{Image: image, WorkingDir: workdir, ImagePullPolicy: pull}
			if user != "" {
				u, g, hasGroup := strings.Cut(user, ":")
				uid, err := strconv.Atoi(u)
				if err != nil || uid < 0 {
					return exitErr("invalid --user %q: want UID or UID:GID", user)
				}
				req.RunAsUser = &uid
				if hasGroup {
					gid, err := strconv.Atoi(g)
					if err != nil || gid < 0 {
						return exitErr("invalid --user %q: want UID or UID:GID", user)
					}
					req.RunAsGroup = &gid
				}
			}
			be, err := f.backend(host)
			if err != nil {
				return exitErr("%v", err)
			}
			ctx, cancel := signalContext()
			defer cancel()
			res, err := openhands.Up(ctx, be, openhands.UpOptions{
				Request: req, Name: name, Address: address, Port: port, Key: key,
				Aliases: aliases, AgentTree: f.agentTree, TreeImages: f.treeImages, BaseLimits: limits,
				Egress: f.egress, Environment: env, ReadyTimeout: timeout, Logger: slog.Default(),
			})
			if err != nil {
				return sbxError(err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(out, "Agent Server URL: %s\nSession API key:  %s\nSandbox:          %s (sbx rm -f %s removes it)\n", res.URL, res.Key, res.Name, res.Name)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&image, "image", openhands.DefaultImage, "the Agent Server image (or any image, with --agent-tree and --tree-image)")
	fs.StringVar(&name, "name", "", "sandbox name (default openhands-XXXXXXXX)")
	fs.StringVar(&address, "address", "127.0.0.1", "host address the Agent Server's port is published on")
	fs.IntVarP(&port, "port", "p", 8000, "host port the Agent Server is published on")
	fs.StringVarP(&workdir, "workdir", "w", "/workspace", "working directory of the Agent Server (created when missing)")
	fs.StringVarP(&user, "user", "u", "", "UID[:GID] the Agent Server runs as (default: the image's user)")
	fs.StringVar(&keyFile, "key-file", "", "file holding the session key (default: a random one)")
	fs.StringVar(&pull, "pull", "IfNotPresent", "image pull policy: Always, IfNotPresent or Never")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long the pull and the start may take")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.registerCommon(fs, "")
	return cmd
}
