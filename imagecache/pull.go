package imagecache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/internal/errkind"
)

// ErrAuth means the registry refused the credentials (or their absence).
var ErrAuth = errkind.New("registry authentication failed", sbx.ErrRegistryAuth)

// ErrUnreachable means the registry could not be reached.
var ErrUnreachable = errkind.New("registry unreachable", sbx.ErrRegistryUnreachable)

// PullPolicy says when Ensure pulls.
type PullPolicy string

// Pull policies, as in docker and podman run --pull.
const (
	PullMissing PullPolicy = "missing" // pull only when not cached
	PullAlways  PullPolicy = "always"  // always ask the registry (layers already cached are not fetched again)
	PullNever   PullPolicy = "never"   // use the cache only
)

// ParsePullPolicy checks a --pull value.
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch p := PullPolicy(s); p {
	case PullMissing, PullAlways, PullNever:
		return p, nil
	case "":
		return PullMissing, nil
	}
	return "", fmt.Errorf("invalid pull policy %q: use missing, always or never", s)
}

// Ensure returns the image ref, pulling it as policy says.
func (s *Store) Ensure(ctx context.Context, ref string, policy PullPolicy, progress ProgressFunc) (*Image, error) {
	switch policy {
	case PullNever:
		return s.Resolve(ref)
	case PullAlways:
		return s.Pull(ctx, ref, progress)
	case PullMissing, "":
		img, err := s.Resolve(ref)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return img, err
		}
		return s.Pull(ctx, ref, progress)
	}
	return nil, fmt.Errorf("invalid pull policy %q: use missing, always or never", policy)
}

// platform returns the platform to pick from multi-arch images.
func (s *Store) platform() v1.Platform {
	if s.opts.Platform != "" {
		p, _ := v1.ParsePlatform(s.opts.Platform)
		return *p
	}
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if runtime.GOARCH == "arm" {
		p.Variant = "v7"
	}
	return p
}

// Pull fetches ref from its registry into the store: credentials from
// ~/.docker/config.json, plain HTTP for localhost, 127.0.0.1 and the
// insecure registries, the store's platform chosen from a multi-arch index.
// Layers already in the store are not fetched.
func (s *Store) Pull(ctx context.Context, ref string, progress ProgressFunc) (*Image, error) {
	r, err := s.canonicalName(ref)
	if err != nil {
		return nil, err
	}
	plat := s.platform()
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(plat),
		remote.WithUserAgent("sbx"),
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
	}
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, classify(err))
	}
	var img v1.Image
	switch {
	case desc.MediaType.IsIndex():
		img, err = desc.Image() // picks the child for plat
		if err != nil {
			if strings.Contains(err.Error(), "no child with platform") {
				return nil, fmt.Errorf("pull %s: %w: no image for platform %s in the index; choose one with --platform", ref, ErrUnsupported, plat.String())
			}
			return nil, fmt.Errorf("pull %s: %w", ref, classify(err))
		}
	case desc.MediaType.IsImage():
		img, err = desc.Image()
		if err != nil {
			return nil, fmt.Errorf("pull %s: %w", ref, classify(err))
		}
		if s.opts.Platform != "" {
			if err := checkPlatform(img, plat); err != nil {
				return nil, fmt.Errorf("pull %s: %w", ref, err)
			}
		}
	default:
		return nil, fmt.Errorf("pull %s: %w: manifest media type %s is not an image", ref, ErrUnsupported, desc.MediaType)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, classify(err))
	}
	return s.addImage(ctx, r.Name(), digest.String(), img, blobsVerifiedByReader, progress)
}

// checkPlatform fails with ErrUnsupported when a single-platform image's
// config names another platform than want (an explicit --platform).
func checkPlatform(img v1.Image, want v1.Platform) error {
	cfg, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("read image config: %w", classify(err))
	}
	got := cfg.Platform()
	if got == nil {
		return nil // the config names no platform: nothing differs
	}
	if !got.Satisfies(want) {
		return fmt.Errorf("%w: the image is for platform %s, not the requested --platform %s (it is not a multi-platform index)", ErrUnsupported, platformString(cfg), want.String())
	}
	return nil
}

// blobCheck says how the compressed layer blobs of an image are verified.
type blobCheck int

const (
	blobsVerifiedByReader blobCheck = iota // remote: go-containerregistry checks the digest while reading
	blobsHashed                            // OCI layouts: sbx hashes them
	blobsUncompressed                      // docker save: layers read uncompressed, checked by diffID only
)

// addImage brings a v1.Image into the store and records it under name.
// Every layer is checked against its diffID; compressed blobs as check says.
func (s *Store) addImage(ctx context.Context, name, digest string, img v1.Image, check blobCheck, progress ProgressFunc) (*Image, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read image config of %s: %w", name, classify(err))
	}
	if cfg.OS != "" && cfg.OS != "linux" {
		return nil, fmt.Errorf("%s: %w: operating system %q, sbx runs linux images", name, ErrUnsupported, cfg.OS)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("read layers of %s: %w", name, classify(err))
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return nil, fmt.Errorf("%s: image has %d layers but its config lists %d diffIDs", name, len(layers), len(cfg.RootFS.DiffIDs))
	}
	srcs := make([]layerSource, len(layers))
	for i, l := range layers {
		src := layerSource{diffID: cfg.RootFS.DiffIDs[i].String()}
		if check != blobsUncompressed {
			mt, err := l.MediaType()
			if err != nil {
				return nil, fmt.Errorf("layer %d of %s: %w", i, name, classify(err))
			}
			if !supportedLayer(mt) {
				return nil, fmt.Errorf("%s: %w: layer media type %s", name, ErrUnsupported, mt)
			}
			d, err := l.Digest()
			if err != nil {
				return nil, fmt.Errorf("layer %d of %s: %w", i, name, classify(err))
			}
			src.digest = d.String()
			src.digestChecked = check == blobsVerifiedByReader
			if n, err := l.Size(); err == nil {
				src.size = n
			}
			src.open = l.Compressed
		} else {
			src.open = l.Uncompressed
		}
		srcs[i] = src
	}
	unlock, err := s.lock(ctx, "store", unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	recs, err := s.ingest(ctx, srcs, progress)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FamiliarName(name), err)
	}
	rec := record{
		Name:     name,
		Digest:   digest,
		Created:  cfg.Created.Time,
		Stored:   time.Now().UTC(),
		Platform: platformString(cfg),
		Config:   configOf(cfg),
		Layers:   recs,
		History:  historyOf(cfg.History),
	}
	if err := s.put(ctx, rec); err != nil {
		return nil, err
	}
	return s.image(&rec), nil
}

// put adds or replaces the record of rec.Name in the index.
func (s *Store) put(ctx context.Context, rec record) error {
	return s.updateIndex(ctx, func(idx *index) error {
		for i := range idx.Images {
			if idx.Images[i].Name == rec.Name {
				idx.Images[i] = rec
				return nil
			}
		}
		idx.Images = append(idx.Images, rec)
		return nil
	})
}

func platformString(cfg *v1.ConfigFile) string {
	p := cfg.OS + "/" + cfg.Architecture
	if cfg.Variant != "" {
		p += "/" + cfg.Variant
	}
	return p
}

func configOf(cfg *v1.ConfigFile) ImageConfig {
	c := cfg.Config
	return ImageConfig{
		Entrypoint:   c.Entrypoint,
		Cmd:          c.Cmd,
		Env:          c.Env,
		WorkingDir:   c.WorkingDir,
		User:         c.User,
		Labels:       c.Labels,
		StopSignal:   c.StopSignal,
		ExposedPorts: setKeys(c.ExposedPorts),
		Volumes:      setKeys(c.Volumes),
		Shell:        c.Shell,
		Healthcheck:  healthcheckOf(c.Healthcheck),
		OnBuild:      c.OnBuild,
	}
}

// setKeys returns the keys of an OCI config's set (ExposedPorts,
// Volumes), sorted.
func setKeys(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

func healthcheckOf(h *v1.HealthConfig) *sbx.Healthcheck {
	if h == nil {
		return nil
	}
	return &sbx.Healthcheck{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, Retries: h.Retries}
}

func historyOf(hs []v1.History) []HistoryEntry {
	var out []HistoryEntry
	for _, h := range hs {
		out = append(out, HistoryEntry{Created: h.Created.UTC(), CreatedBy: h.CreatedBy, Comment: h.Comment, EmptyLayer: h.EmptyLayer})
	}
	return out
}

func supportedLayer(mt types.MediaType) bool {
	switch mt {
	case types.DockerLayer, types.DockerUncompressedLayer, types.DockerForeignLayer,
		types.OCILayer, types.OCILayerZStd, types.OCIUncompressedLayer,
		types.OCIRestrictedLayer, types.OCIUncompressedRestrictedLayer, "":
		return true
	}
	return false
}

// classify wraps registry and network errors with ErrNotFound, ErrAuth or
// ErrUnreachable and a hint.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%w (log in with docker login, credentials are read from ~/.docker/config.json): %w", ErrAuth, err)
		case http.StatusNotFound:
			return fmt.Errorf("%w: unknown repository, tag or blob: %w", ErrNotFound, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return fmt.Errorf("%w: %w", ErrNotFound, err)
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return fmt.Errorf("%w: %w", ErrAuth, err)
			}
		}
		return err
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, unix.ECONNREFUSED) {
		return fmt.Errorf("%w (check the address, the network and --insecure-registry for plain HTTP): %w", ErrUnreachable, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("connection closed early: %w", err)
	}
	if strings.Contains(err.Error(), "error verifying") || strings.Contains(err.Error(), "does not match expected size") || strings.Contains(err.Error(), "digest") && strings.Contains(err.Error(), "match") {
		return fmt.Errorf("%w: %w", ErrDigestMismatch, err)
	}
	return err
}
