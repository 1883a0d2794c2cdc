package imagecache

import (
	"strings"
	"time"

	"github.com/sbxrun/sbx"
)

// Image is a cached image, ready to run.
type Image struct {
	Name     string      `json:"name"`     // canonical name, e.g. index.docker.io/library/busybox:latest
	Digest   string      `json:"digest"`   // manifest digest (sha256:...); the config digest for docker save and local images
	Created  time.Time   `json:"created"`  // creation time from the image config
	Platform string      `json:"platform"` // os/arch[/variant]
	Size     int64       `json:"size"`     // bytes of the unpacked layers' files
	Config   ImageConfig `json:"config"`
	// LayerDirs are the unpacked layers, LOWEST FIRST. Each is usable as an
	// overlayfs lower directory as is (whiteouts in overlayfs form); an
	// overlay mount takes them in reverse order (lowerdir=top:...:bottom).
	LayerDirs []string `json:"layerDirs"`
	DiffIDs   []string `json:"diffIDs"` // the layers' diffIDs, lowest first
}

// ImageConfig is the part of the OCI image config that decides how a
// process starts in the image.
type ImageConfig struct {
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        []string          `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	User       string            `json:"user,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	StopSignal string            `json:"stopSignal,omitempty"`
	// ExposedPorts, Volumes, Shell and Healthcheck are kept for what
	// builds and saves write; they do not change how a process starts.
	ExposedPorts []string         `json:"exposedPorts,omitempty"`
	Volumes      []string         `json:"volumes,omitempty"`
	Shell        []string         `json:"shell,omitempty"`
	Healthcheck  *sbx.Healthcheck `json:"healthcheck,omitempty"`
	OnBuild      []string         `json:"onBuild,omitempty"`
}

// DefaultPath is the PATH a process gets when the image sets none.
const DefaultPath = sbx.DefaultPath

// ProcessOverrides are what a user gives on the command line to change how
// the image's process starts; zero fields keep the image's values.
type ProcessOverrides struct {
	// Entrypoint replaces the image's Entrypoint when non-nil (an empty,
	// non-nil slice clears it), and then the image's Cmd is dropped too,
	// as docker does.
	Entrypoint []string
	Cmd        []string // replaces the image's Cmd when non-empty (the args after IMAGE)
	Env        []string // KEY=VALUE, added to or replacing the image's; KEY alone is dropped
	WorkingDir string   // replaces the image's WorkingDir
	User       string   // replaces the image's User (name, uid, name:group, uid:gid)
}

// Process is the first process of a sandbox as the image and the overrides
// ask for it. User is still a string: resolve it with LookupUser in the
// mounted root.
type Process = sbx.Process

// Contract returns the config in the contract's form.
func (c ImageConfig) Contract() *sbx.ImageConfig {
	return &sbx.ImageConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir,
		User: c.User, Labels: c.Labels, StopSignal: c.StopSignal, ExposedPorts: c.ExposedPorts,
		Volumes: c.Volumes, Shell: c.Shell, Healthcheck: c.Healthcheck, OnBuild: c.OnBuild}
}

// Process combines the image config with overrides the way docker run does
// (see sbx.ImageConfig.Process).
func (c ImageConfig) Process(o ProcessOverrides) (Process, error) {
	return c.Contract().Process(o.Entrypoint, o.Cmd, o.Env, o.WorkingDir, o.User)
}

// MergeEnv returns base with each KEY=VALUE of over replacing the entry of
// the same key (or appended); an entry of over without "=" removes the key.
func MergeEnv(base, over []string) []string { return sbx.MergeEnv(base, over) }

func hasKey(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// EnvWithHome returns env with HOME=home added unless env sets HOME, as
// docker does once the user is resolved.
func EnvWithHome(env []string, home string) []string {
	if hasKey(env, "HOME") || home == "" {
		return env
	}
	return append(append([]string{}, env...), "HOME="+home)
}
