package openhands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	units "github.com/docker/go-units"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/server"
)

// Settings are an operator's settings of the runtimes, in the text forms
// of sbx's flags (--openhands-alias ... for sbx serve, --alias ... for
// sbx openhands up); Parse checks and converts them.
type Settings struct {
	// Aliases are PATTERN=IMAGE entries (Alias).
	Aliases []string
	// AgentTree is an absolute host directory; TreeImages the image
	// patterns that get it (Config.AgentTree).
	AgentTree  string
	TreeImages []string
	// Memory ("4g"), CPUs and Pids are a runtime's limits at
	// resource_factor 1; zero means none.
	Memory string
	CPUs   float64
	Pids   int64
	// Egress of the runtimes' bridge network (Config.Egress).
	Egress string
	// Env are KEY=VALUE entries added to every Agent Server's environment.
	Env []string
}

// Parsed is what Parse makes of Settings.
type Parsed struct {
	Aliases     []Alias
	BaseLimits  sbx.Limits
	Environment map[string]string
}

// Parse checks s; flag is the flags' prefix ("openhands-" or "") that
// errors name.
func (s *Settings) Parse(flag string) (Parsed, error) {
	var p Parsed
	for _, a := range s.Aliases {
		pattern, image, ok := strings.Cut(a, "=")
		if !ok || pattern == "" || image == "" {
			return p, fmt.Errorf("invalid --%salias %q: want PATTERN=IMAGE", flag, a)
		}
		p.Aliases = append(p.Aliases, Alias{Pattern: pattern, Image: image})
	}
	if s.Memory != "" {
		n, err := units.RAMInBytes(s.Memory)
		if err != nil || n <= 0 {
			return p, fmt.Errorf("invalid --%s %q: want a size like 16m", flag+"memory", s.Memory)
		}
		p.BaseLimits.MemoryBytes = n
	}
	if s.CPUs < 0 || s.Pids < 0 {
		return p, fmt.Errorf("invalid --%scpus or --%spids-limit: want a positive number", flag, flag)
	}
	p.BaseLimits.CPUs, p.BaseLimits.Pids = s.CPUs, s.Pids
	p.Environment = map[string]string{}
	for _, kv := range s.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return p, fmt.Errorf("invalid --%senv %q: want KEY=VALUE", flag, kv)
		}
		p.Environment[k] = v
	}
	if s.AgentTree != "" && !filepath.IsAbs(s.AgentTree) {
		return p, fmt.Errorf("--%sagent-tree %q must be an absolute path", flag, s.AgentTree)
	}
	return p, nil
}

// Policy is the policy of a Runtime API's backend: the agent tree is the
// only host path its sandboxes mount, and nothing else is allowed.
func (s *Settings) Policy() *sbx.Policy {
	p := &sbx.Policy{}
	if s.AgentTree != "" {
		p.AllowedHostDirs = []string{s.AgentTree}
	}
	return p
}

// ServeOptions say which Runtime APIs a server serves besides its REST
// API, as sbx serve's --openhands-* flags do.
type ServeOptions struct {
	Settings
	// Listen serves the API in path mode, PortListen in port mode
	// (ListenOptions.PortMode); neither: none.
	Listen, PortListen string
	// KeyFile holds the keys clients send as X-API-Key, one per line, one
	// per app server or tenant (ReadKeys): each sees only its runtimes.
	KeyFile string
	// PublicHost is how clients reach the listeners (ListenOptions).
	PublicHost        string
	RotateKeyOnResume bool
	// WarmSize is how many dormant Agent Servers each warm shape keeps
	// (WarmConfig.Size); WarmFile a JSON file of shapes (WarmFile);
	// WarmLearn how many shapes of recent starts are kept warm besides.
	WarmSize  int
	WarmFile  string
	WarmLearn int
	// ServerToken is the REST server's bearer token: the data plane strips
	// it from what it forwards into sandboxes (Config.ServerTokens).
	ServerToken string
	// StateRoot holds each mode's runtime records (StateRoot/path,
	// StateRoot/port).
	StateRoot string
	Logger    *slog.Logger
}

// Enabled reports whether a Runtime API listener is asked for.
func (o *ServeOptions) Enabled() bool { return o.Listen != "" || o.PortListen != "" }

// Config checks o and reads its key: the Config ListenAll starts the
// listeners with. With no listener asked for it is empty, and an error if
// listener options are given anyway.
func (o *ServeOptions) Config() (Config, error) {
	if !o.Enabled() {
		if o.KeyFile != "" || o.PublicHost != "" {
			return Config{}, errors.New("--openhands-key-file and --openhands-public-host need --openhands-listen or --openhands-port-listen")
		}
		return Config{}, nil
	}
	if o.KeyFile == "" {
		return Config{}, errors.New("the OpenHands Runtime API needs a key: --openhands-key-file F (clients send it as X-API-Key)")
	}
	keys, err := ReadKeys(o.KeyFile)
	if err != nil {
		return Config{}, fmt.Errorf("--openhands-key-file: %w", err)
	}
	p, err := o.Parse("openhands-")
	if err != nil {
		return Config{}, err
	}
	warm, err := o.warmConfig()
	if err != nil {
		return Config{}, err
	}
	return Config{
		APIKey: keys[0], APIKeys: keys[1:], ServerTokens: []string{o.ServerToken}, Aliases: p.Aliases, AgentTree: o.AgentTree, TreeImages: o.TreeImages, BaseLimits: p.BaseLimits,
		Egress: o.Egress, Environment: p.Environment, RotateKeyOnResume: o.RotateKeyOnResume, Logger: o.Logger,
		Warm: warm,
	}, nil
}

// warmConfig checks the warm flags and reads the shapes file.
func (o *ServeOptions) warmConfig() (WarmConfig, error) {
	c := WarmConfig{Size: o.WarmSize, Learn: o.WarmLearn}
	if c.Size < 0 || c.Size > MaxWarmSize {
		return c, fmt.Errorf("invalid --openhands-warm %d: use 0 to %d dormant Agent Servers per shape", c.Size, MaxWarmSize)
	}
	if c.Learn < 0 {
		return c, fmt.Errorf("invalid --openhands-warm-learn %d: want 0 or more shapes", c.Learn)
	}
	if o.WarmFile == "" {
		return c, nil
	}
	data, err := os.ReadFile(o.WarmFile)
	if err != nil {
		return c, fmt.Errorf("--openhands-warm-config: %w", err)
	}
	var f WarmFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return c, fmt.Errorf("--openhands-warm-config %s: %w (want {\"configs\": [{\"name\", \"image\", \"command\", \"working_dir\", \"environment\", ...}]})", o.WarmFile, err)
	}
	c.Shapes = f.Configs
	return c, nil
}

// ListenAll opens the listeners o asks for over be with cfg (Config), the
// state of each under StateRoot; the caller serves them (Listener.Serve).
// On error none is left open.
func ListenAll(be Backend, cfg Config, o *ServeOptions) (Listeners, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	var out Listeners
	for _, l := range []struct {
		addr, mode string
	}{{o.Listen, "path"}, {o.PortListen, "port"}} {
		if l.addr == "" {
			continue
		}
		cfg.StateDir = filepath.Join(o.StateRoot, l.mode)
		ln, err := Listen(be, cfg, ListenOptions{Addr: l.addr, PublicHost: o.PublicHost, PortMode: l.mode == "port"})
		if err != nil {
			out.Close()
			return nil, err
		}
		out = append(out, ln)
		log.Info("sbx serve: OpenHands Runtime API", "addr", ln.Addr().String(), "urls", l.mode, "public", ln.PublicURL())
	}
	return out, nil
}

// Listeners are the Runtime APIs ListenAll opened.
type Listeners []*Listener

// Companions are the listeners for server.ServeWith, which serves them
// beside the REST API (each closes itself once served).
func (ls Listeners) Companions() []server.Companion {
	out := make([]server.Companion, len(ls))
	for i, l := range ls {
		out[i] = l
	}
	return out
}

// Close closes listeners that are not served.
func (ls Listeners) Close() {
	for _, l := range ls {
		l.Close()
	}
}

// ParseUser parses sbx openhands up's --user UID[:GID] into a request.
func (r *StartRequest) ParseUser(user string) error {
	if user == "" {
		return nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil || uid < 0 {
		return fmt.Errorf("invalid --user %q: want UID or UID:GID", user)
	}
	r.RunAsUser = &uid
	if hasGroup {
		gid, err := strconv.Atoi(g)
		if err != nil || gid < 0 {
			return fmt.Errorf("invalid --user %q: want UID or UID:GID", user)
		}
		r.RunAsGroup = &gid
	}
	return nil
}
