package sbx

import (
	"context"
	"fmt"
	"io"
	"os"
)

// BuildOptions says what to build from a Dockerfile (see Builder).
type BuildOptions struct {
	// Tag names the image built ("name[:tag]"); empty leaves it known by
	// its digest alone.
	Tag string `json:"tag,omitempty"`
	// ContextDir is the build context: the directory COPY and ADD read.
	ContextDir string `json:"context_dir,omitempty"`
	// Dockerfile is the Dockerfile's path; empty is ContextDir/Dockerfile.
	Dockerfile string `json:"dockerfile,omitempty"`
	// DockerfileText, when set, is the Dockerfile itself (Dockerfile is
	// then only its name in messages).
	DockerfileText string `json:"dockerfile_text,omitempty"`
	// BuildArgs set the Dockerfile's ARGs (--build-arg K=V).
	BuildArgs map[string]string `json:"build_args,omitempty"`
	// Target is the stage to build; empty is the last one.
	Target string `json:"target,omitempty"`
	// Pull is the pull policy of FROM and COPY --from images (the host's
	// by default).
	Pull string `json:"pull,omitempty"`
	// NoCache builds every step again instead of reusing earlier results.
	NoCache bool `json:"no_cache,omitempty"`
	// Network is the network of RUN steps: NetworkNone (the default) or
	// NetworkBridge.
	Network string `json:"network,omitempty"`
	// Secrets are the values RUN --mount=type=secret reads, by id
	// (--secret id=ID,src=FILE|env=VAR). They reach the RUN steps that
	// mount them and nothing else: no layer, no history, no cache key.
	// A remote build sends them in its request's body (never in its URL
	// or headers); each is at most MaxBuildSecretBytes.
	Secrets map[string]string `json:"-"`
	// SSH are the ssh agents RUN --mount=type=ssh forwards, by id ("default"
	// unless the mount names one): the path of each agent's unix socket on
	// this host (--ssh default=$SSH_AUTH_SOCK), bound into the steps that
	// mount it and into no layer. Local builds only.
	SSH map[string]string `json:"-"`
	// Output receives the progress as docker prints it: each step, CACHED
	// or the output of its RUN, and its duration.
	Output io.Writer `json:"-"`
}

// BuildResult is what a build made.
type BuildResult struct {
	Image Image `json:"image"`
	// Steps counts the steps of the stages built; Cached those reused.
	Steps  int `json:"steps"`
	Cached int `json:"cached"`
}

// MaxBuildSecretBytes caps one build secret's value.
const MaxBuildSecretBytes = 1 << 20

// BuildPrefix names the images a build keeps for its step cache
// ("sbx-build:<key>").
const BuildPrefix = "sbx-build"

// BuildPruneReport says what PruneBuildCache removed.
type BuildPruneReport struct {
	// Images are the step images (sbx-build:*) removed.
	Images int `json:"images"`
	// CacheMounts are the RUN --mount=type=cache directories removed, and
	// CacheMountBytes what they held; a cache a running step uses stays.
	CacheMounts     int   `json:"cache_mounts"`
	CacheMountBytes int64 `json:"cache_mount_bytes"`
	// Layers are the layers no image used any more, removed.
	Layers ImageGCReport `json:"layers"`
}

// BuildCachePruner removes what builds keep between them: the step cache
// and the cache mounts. The local host and the server's client implement
// it.
type BuildCachePruner interface {
	PruneBuildCache(ctx context.Context) (*BuildPruneReport, error)
}

// Builder builds images from Dockerfiles. The local host implements it.
type Builder interface {
	Build(ctx context.Context, o BuildOptions) (*BuildResult, error)
}

// CheckSSHAgent checks that path, given as an ssh agent to forward
// (BuildOptions.SSH), is a unix socket: a build forwards ssh agents, never
// key files or anything else of the host.
func CheckSSHAgent(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w: ssh agent socket: %w (give ssh-agent's socket, e.g. $SSH_AUTH_SOCK)", ErrInvalid, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%w: %s is not a socket: a build forwards ssh agents (ssh-agent's socket, e.g. $SSH_AUTH_SOCK), not key files", ErrInvalid, path)
	}
	return nil
}
