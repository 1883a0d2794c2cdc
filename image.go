package sbx

import (
	"encoding/json"
	"errors"
	"io"
	"path"
	"slices"
	"strings"
	"time"
)

// Image is an image in a host's cache.
type Image struct {
	// Name is the canonical name (index.docker.io/library/busybox:latest).
	Name string `json:"name"`
	// Digest is the manifest digest (the config digest for docker save
	// archives and committed images).
	Digest   string    `json:"digest"`
	Created  time.Time `json:"created,omitzero"`
	Platform string    `json:"platform,omitempty"`
	// SizeBytes is the size of the unpacked layers' files.
	SizeBytes int64        `json:"size_bytes"`
	Config    *ImageConfig `json:"config,omitempty"`
	// LayerDirs are the unpacked layer directories on the image's host,
	// lowest first (only inspect gives them).
	LayerDirs []string `json:"layer_dirs,omitempty"`
	// DiffIDs are the layers' diffIDs, lowest first.
	DiffIDs []string `json:"diff_ids,omitempty"`
	// Loaded is set by ImportImage when the archive named several images
	// and no ImportOptions.Name picked one: then all of them were added
	// (as docker load does), and Loaded lists them in the archive's order,
	// this image first.
	Loaded []Image `json:"loaded,omitempty"`
}

// ImageConfig is the part of an image config that decides how a process
// starts in the image.
type ImageConfig struct {
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        []string          `json:"env,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	User       string            `json:"user,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	StopSignal string            `json:"stop_signal,omitempty"`
	// ExposedPorts are the ports the image says it listens on ("80/tcp").
	ExposedPorts []string `json:"exposed_ports,omitempty"`
	// Volumes are the paths the image marks as volumes.
	Volumes []string `json:"volumes,omitempty"`
	// Shell is the shell of a Dockerfile's shell-form instructions.
	Shell []string `json:"shell,omitempty"`
	// Healthcheck is how the image says to check that it is healthy.
	Healthcheck *Healthcheck `json:"healthcheck,omitempty"`
	// OnBuild are the Dockerfile ONBUILD triggers that a build starting
	// FROM this image runs first.
	OnBuild []string `json:"on_build,omitempty"`
}

// Healthcheck is an image's health check (Dockerfile HEALTHCHECK): Test is
// ["NONE"], ["CMD", argv...] or ["CMD-SHELL", command]; zero durations are
// the runtime's defaults. In JSON the durations are numbers of seconds
// (interval_s, timeout_s, start_period_s).
type Healthcheck struct {
	Test        []string      `json:"test,omitempty"`
	Interval    time.Duration `json:"-"`
	Timeout     time.Duration `json:"-"`
	StartPeriod time.Duration `json:"-"`
	Retries     int           `json:"retries,omitempty"`
}

// healthcheckJSON is Healthcheck without its methods, for the JSON codec.
type healthcheckJSON Healthcheck

// healthcheckWire is a Healthcheck's JSON: durations in seconds.
type healthcheckWire struct {
	healthcheckJSON
	IntervalS    float64 `json:"interval_s,omitempty"`
	TimeoutS     float64 `json:"timeout_s,omitempty"`
	StartPeriodS float64 `json:"start_period_s,omitempty"`
}

// MarshalJSON writes the durations as numbers of seconds.
func (h Healthcheck) MarshalJSON() ([]byte, error) {
	return json.Marshal(healthcheckWire{healthcheckJSON(h), h.Interval.Seconds(), h.Timeout.Seconds(), h.StartPeriod.Seconds()})
}

// UnmarshalJSON reads the durations from numbers of seconds.
func (h *Healthcheck) UnmarshalJSON(data []byte) error {
	var v healthcheckWire
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*h = Healthcheck(v.healthcheckJSON)
	h.Interval, h.Timeout, h.StartPeriod = secondsDuration(v.IntervalS), secondsDuration(v.TimeoutS), secondsDuration(v.StartPeriodS)
	return nil
}

// DefaultPath is the PATH a process gets when neither the image nor the
// caller sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Process is the first process of a sandbox as an image and a caller ask
// for it. User is still a string, resolved later in the sandbox's root.
type Process struct {
	Args []string
	Env  []string
	Cwd  string
	User string
}

// Process combines the image config with what the caller gives, the way
// docker run does: argv is Entrypoint + Cmd, where a non-nil entrypoint
// replaces the image's (and drops its Cmd) and a non-empty cmd replaces
// the image's Cmd; env is merged by key (an entry without "=" removes the
// key) with PATH defaulted; the working directory and user replace the
// image's when set, the working directory defaulting to "/".
func (c ImageConfig) Process(entrypoint, cmd, env []string, workdir, user string) (Process, error) {
	entry, args := c.Entrypoint, c.Cmd
	if entrypoint != nil {
		entry, args = entrypoint, nil
	}
	if len(cmd) > 0 {
		args = cmd
	}
	p := Process{Args: append(append([]string{}, entry...), args...)}
	if len(p.Args) == 0 {
		return Process{}, errors.New("no command to run: the image has no Entrypoint or Cmd; give a command after the image name")
	}
	p.Env = MergeEnv(c.Env, env)
	if !hasEnv(p.Env, "PATH") {
		p.Env = append([]string{"PATH=" + DefaultPath}, p.Env...)
	}
	p.Cwd = c.WorkingDir
	if workdir != "" {
		p.Cwd = workdir
	}
	p.Cwd = path.Clean("/" + p.Cwd)
	p.User = c.User
	if user != "" {
		p.User = user
	}
	return p, nil
}

// HealthCommand is the argv of the image's health check: the command of
// a ["CMD", argv...] test, or a ["CMD-SHELL", command] test run by the
// image's Shell (default /bin/sh -c) as docker runs it; nil when the image
// has none or turns it off (["NONE"]).
func (c ImageConfig) HealthCommand() []string {
	h := c.Healthcheck
	if h == nil || len(h.Test) < 2 {
		return nil
	}
	switch h.Test[0] {
	case "CMD":
		return slices.Clone(h.Test[1:])
	case "CMD-SHELL":
		shell := c.Shell
		if len(shell) == 0 {
			shell = []string{"/bin/sh", "-c"}
		}
		return append(slices.Clone(shell), strings.Join(h.Test[1:], " "))
	}
	return nil
}

// MergeEnv returns base with each KEY=VALUE of over replacing the entry of
// the same key (or appended); an entry of over without "=" removes the
// key.
func MergeEnv(base, over []string) []string {
	out := make([]string, 0, len(base)+len(over))
	pos := map[string]int{}
	put := func(kv string) {
		k, _, hasEq := strings.Cut(kv, "=")
		i, seen := pos[k]
		switch {
		case !hasEq && seen:
			out[i] = ""
			delete(pos, k)
		case !hasEq:
		case seen:
			out[i] = kv
		default:
			pos[k] = len(out)
			out = append(out, kv)
		}
	}
	for _, kv := range base {
		put(kv)
	}
	for _, kv := range over {
		put(kv)
	}
	res := out[:0]
	for _, kv := range out {
		if kv != "" {
			res = append(res, kv)
		}
	}
	return res
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// PullProgress reports the state of one layer during a pull or import.
type PullProgress struct {
	Layer string `json:"layer"` // digest or diffID
	Index int    `json:"index"` // position in the image, lowest first
	Count int    `json:"count,omitempty"`
	// Phase is waiting, downloading, unpacking, done or cached.
	Phase        string `json:"phase"`
	CurrentBytes int64  `json:"current_bytes"`
	TotalBytes   int64  `json:"total_bytes"` // 0 when unknown
}

// ImportOptions describe an image import from Path or Archive.
type ImportOptions struct {
	// Path is on the caller's machine: an OCI image layout directory, an
	// OCI archive, a docker save tar, or a root file system tarball (tar,
	// tar.gz, tar.zst). A remote backend uploads it.
	Path string
	// Archive, when Path is empty, is read for the archive itself (any of
	// the forms above but the layout directory).
	Archive io.Reader
	// Name is the image's name; needed when the archive names none, and
	// always for a root file system. With several images in the archive it
	// picks one; without it all are imported (see Image.Loaded).
	Name string
	// Progress, if set, receives progress reports (never concurrently).
	Progress func(PullProgress)
}

// ImageGCReport says what an image garbage collection removed.
type ImageGCReport struct {
	RemovedLayers []string `json:"removed_layers"` // keys of the removed layers
	FreedBytes    int64    `json:"freed_bytes"`    // their apparent size
	// KeptInUse are unreferenced layers kept because a mount uses them.
	KeptInUse []string `json:"kept_in_use"`
}

// PrepareOptions describe an image prepared from a base image and a setup
// script.
type PrepareOptions struct {
	// Base is the image to start from.
	Base string
	// Script is run with /bin/sh -c in a sandbox created from Base.
	Script string
	// Sandbox sets how that sandbox is created (env, user, working
	// directory, network, limits); Image, Rootfs, Name, TTL and Cmd are
	// ignored and volumes are refused (they would make the result depend
	// on host files).
	Sandbox Options
	// Output receives the script's output as it runs (nil: discarded).
	Output io.Writer
}

// PreparedPrefix names the images Prepare makes: sbx-prepared:<hash>.
const PreparedPrefix = "sbx-prepared"

// PrepareResult is the prepared image; Cached is true when it was already
// in the cache and the script did not run.
type PrepareResult struct {
	Image  Image `json:"image"`
	Cached bool  `json:"cached"`
}

// DefaultRegistry is the registry of image names that give none.
const DefaultRegistry = "index.docker.io"

// FamiliarName shortens a canonical image name the way docker prints it:
// index.docker.io/library/busybox:latest becomes busybox:latest.
func FamiliarName(name string) string {
	if s, ok := strings.CutPrefix(name, DefaultRegistry+"/library/"); ok {
		return s
	}
	if s, ok := strings.CutPrefix(name, DefaultRegistry+"/"); ok {
		return s
	}
	return name
}

// ImageHistoryEntry is one step of how an image was built, as docker
// history prints it: when, the command that made it, a comment, whether
// it made no layer (ENV, CMD...), and the layer it made (its diffID and
// unpacked size; "" and 0 for a step that made none).
type ImageHistoryEntry struct {
	Created    time.Time `json:"created,omitzero"`
	CreatedBy  string    `json:"created_by,omitempty"`
	Comment    string    `json:"comment,omitempty"`
	EmptyLayer bool      `json:"empty_layer,omitempty"`
	DiffID     string    `json:"diff_id,omitempty"`
	SizeBytes  int64     `json:"size_bytes"`
}
