package openhands

import (
	"time"

	"github.com/spf13/pflag"
)

// Register adds the settings' flags, each name after prefix
// ("openhands-" for sbx serve, none for sbx openhands up), to fs.
func (f *Settings) Register(fs *pflag.FlagSet, prefix string) {
	fs.StringArrayVar(&f.Aliases, prefix+"alias", nil, "map images before they are pulled: PATTERN=IMAGE, * matches anything (repeatable; e.g. 'ghcr.io/openhands/agent-server:*=agent:local')")
	fs.StringVar(&f.AgentTree, prefix+"agent-tree", "", "host directory with a self-contained Agent Server tree, mounted read-only at /agent-server in images matching --"+prefix+"tree-image")
	fs.StringArrayVar(&f.TreeImages, prefix+"tree-image", nil, "image PATTERN that gets the Agent Server tree (repeatable)")
	fs.StringVar(&f.Memory, prefix+"memory", "4g", "memory limit of a runtime (times resource_factor)")
	fs.Float64Var(&f.CPUs, prefix+"cpus", 0, "CPU quota of a runtime (times resource_factor; 0: none)")
	fs.Int64Var(&f.Pids, prefix+"pids-limit", 4096, "process limit of a runtime (times resource_factor)")
	fs.StringVar(&f.Egress, prefix+"egress", "", "egress of the runtimes' bridge network: CIDRs and host names (see --egress of sbx create) or none (default: the internet, no private ranges)")
	fs.StringArrayVar(&f.Env, prefix+"env", nil, "KEY=VALUE added to every Agent Server's environment (repeatable)")
}

// Register adds sbx serve's --openhands-* flags to fs.
func (f *ServeOptions) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Listen, "openhands-listen", "", "serve the OpenHands Runtime API on this TCP address (runtime URLs <public>/<runtime_id>: for the app server)")
	fs.StringVar(&f.PortListen, "openhands-port-listen", "", "serve the OpenHands Runtime API on this TCP address with a port of its own per runtime on the same host address (for the SDK's APIRemoteWorkspace)")
	fs.StringVar(&f.KeyFile, "openhands-key-file", "", "file holding the key Runtime API clients send as X-API-Key (required with --openhands-listen)")
	fs.StringVar(&f.PublicHost, "openhands-public-host", "", "host name or address clients reach the Runtime API at, for runtime URLs (default: the listen address)")
	fs.BoolVar(&f.RotateKeyOnResume, "openhands-rotate-key-on-resume", false, "give a resumed runtime a new session key")
	fs.IntVar(&f.WarmSize, "openhands-warm", 0, "dormant Agent Servers each warm shape keeps booted for starts that run at once (0: none; see docs/openhands.md)")
	fs.StringVar(&f.WarmFile, "openhands-warm-config", "", "JSON file of shapes to keep warm: {\"configs\": [{name, image, command, working_dir, environment, size, ...}]}")
	fs.IntVar(&f.WarmLearn, "openhands-warm-learn", 1, "shapes of recent starts kept warm besides (with --openhands-warm)")
	f.Settings.Register(fs, "openhands-")
}

// Register adds sbx openhands up's flags to fs.
func (f *UpFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Image, "image", DefaultImage, "the Agent Server image (or any image, with --agent-tree and --tree-image)")
	fs.StringVar(&f.Name, "name", "", "sandbox name (default openhands-XXXXXXXX)")
	fs.StringVar(&f.Address, "address", "127.0.0.1", "host address the Agent Server's port is published on")
	fs.IntVarP(&f.Port, "port", "p", 8000, "host port the Agent Server is published on")
	fs.StringVarP(&f.WorkingDir, "workdir", "w", "/workspace", "working directory of the Agent Server (created when missing)")
	fs.StringVarP(&f.User, "user", "u", "", "UID[:GID] the Agent Server runs as (default: the image's user)")
	fs.StringVar(&f.KeyFile, "key-file", "", "file holding the session key (default: a random one)")
	fs.StringVar(&f.Pull, "pull", "IfNotPresent", "image pull policy: Always, IfNotPresent or Never")
	fs.DurationVar(&f.Timeout, "timeout", 10*time.Minute, "how long the pull and the start may take")
	fs.IntVar(&f.Warm, "warm", 0, "also keep N dormant Agent Servers of this shape in a warm pool for later ups (filled by sbx serve or sbx pool fill)")
	f.Settings.Register(fs, "")
}
