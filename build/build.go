package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/executor/client"
)

// Engine is what a build runs on: the local host. Build sandboxes are made
// with its Sandboxes methods; the rest stores and finds step results.
type Engine interface {
	sbx.Sandboxes
	// Image resolves a FROM or COPY --from image reference, pulling it as
	// the pull policy pull ("": the host's) allows; the result carries its config.
	Image(ctx context.Context, ref, pull string) (*sbx.Image, error)
	// Cached returns the image called name, or nil when there is none.
	Cached(ctx context.Context, name string) (*sbx.Image, error)
	// LockStep holds the lock of one step's key, across processes, so that
	// concurrent builds of the same step wait instead of building twice.
	LockStep(ctx context.Context, key string) (unlock func(), err error)
	// CommitStep stores the writable layer of the build sandbox ref over
	// its image as the image name, with the config cfg and the history
	// line createdBy. The in-sandbox paths of drop (mount points the step
	// needed) stay out of the layer where the step made them and left
	// them empty.
	CommitStep(ctx context.Context, ref, name string, cfg sbx.ImageConfig, createdBy string, drop []string) (*sbx.Image, error)
	// Scratch stores an image without layers, with the config cfg, as
	// name: the start of FROM scratch.
	Scratch(ctx context.Context, name string, cfg sbx.ImageConfig) (*sbx.Image, error)
	// CacheDir is the host directory of the RUN --mount=type=cache called
	// id, kept across builds; made with the mode and owner given when new.
	// It is held (no prune removes it) until release.
	CacheDir(id string, mode os.FileMode, uid, gid int) (dir string, release func(), err error)
	// TempDir is a new private host directory for one step's mounts, on
	// memory when secret (it holds secrets), removed by the caller.
	TempDir(secret bool) (string, error)
	// Configure stores the image image as name with the config cfg and no
	// new layer.
	Configure(ctx context.Context, image, name string, cfg sbx.ImageConfig, createdBy string) (*sbx.Image, error)
	// TagImage names an image.
	TagImage(ctx context.Context, source, target string) (*sbx.Image, error)
}

// keyVersion changes when the meaning of a step key does.
const keyVersion = "sbx-build/1"

// maxCopyFrom caps what one COPY --from reads out of another stage.
const maxCopyFrom = 16 << 30

// Build builds the image the Dockerfile of o describes, on eng.
func Build(ctx context.Context, eng Engine, o sbx.BuildOptions) (*sbx.BuildResult, error) {
	b, err := newBuilder(eng, o)
	if err != nil {
		return nil, err
	}
	defer b.ctx.close()
	order, err := b.f.plan(o.Target)
	if err != nil {
		return nil, err
	}
	for _, m := range b.f.metaArgs {
		gs := &scope{lex: b.lex, args: b.args.global}
		if err := gs.expand(&m); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: ARG: %v", sbx.ErrInvalid, b.f.name, line(&m), err)
		}
		b.args.declare(&m, b.args.global, true)
	}
	for n, i := range order {
		res, err := b.stage(ctx, i, n+1, len(order))
		if err != nil {
			return nil, err
		}
		b.results[i] = res
	}
	for k := range o.BuildArgs {
		if !b.args.used[k] {
			b.printf("warning: build argument %s was not used by any ARG\n", k)
		}
	}
	final := b.results[order[len(order)-1]].img
	if o.Tag != "" {
		if final, err = eng.TagImage(ctx, final.Digest, o.Tag); err != nil {
			return nil, fmt.Errorf("name the image %s: %w", o.Tag, err)
		}
	}
	b.printf("built %s%s in %.2fs (%d steps, %d cached)\n", shortDigest(final.Digest), named(o.Tag), time.Since(b.start).Seconds(), b.steps, b.cached)
	return &sbx.BuildResult{Image: *final, Steps: b.steps, Cached: b.cached}, nil
}

func named(tag string) string {
	if tag == "" {
		return ""
	}
	return " as " + tag
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// builder is one build in progress.
type builder struct {
	eng     Engine
	o       sbx.BuildOptions
	f       *file
	lex     *shell.Lex
	ctx     *buildContext
	args    *args
	results map[int]*stageState
	start   time.Time
	steps   int
	cached  int
}

func newBuilder(eng Engine, o sbx.BuildOptions) (*builder, error) {
	if o.ContextDir == "" {
		return nil, fmt.Errorf("%w: a build needs a context directory", sbx.ErrInvalid)
	}
	switch o.Network {
	case "", sbx.NetworkNone, sbx.NetworkBridge:
	default:
		return nil, fmt.Errorf("%w: build network %q: use none or bridge", sbx.ErrInvalid, o.Network)
	}
	for id, sock := range o.SSH {
		if err := sbx.CheckSSHAgent(sock); err != nil {
			return nil, fmt.Errorf("ssh agent %s: %w", id, err)
		}
	}
	dfPath := o.Dockerfile
	if dfPath == "" {
		dfPath = filepath.Join(o.ContextDir, "Dockerfile")
	}
	text := []byte(o.DockerfileText)
	if o.DockerfileText == "" {
		var err error
		if text, err = readCapped(dfPath); err != nil {
			return nil, fmt.Errorf("%w: read the Dockerfile: %v", sbx.ErrInvalid, err)
		}
	}
	f, err := parse(filepath.Base(dfPath), text)
	if err != nil {
		return nil, err
	}
	bc, err := openContext(o.ContextDir, dfPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sbx.ErrInvalid, err)
	}
	if o.Output == nil {
		o.Output = io.Discard
	}
	return &builder{eng: eng, o: o, f: f, lex: shell.NewLex(f.escape), ctx: bc, args: newArgs(o.BuildArgs),
		results: map[int]*stageState{}, start: time.Now()}, nil
}

func readCapped(p string) ([]byte, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, maxDockerfile+1))
}

func (b *builder) printf(format string, a ...any) { fmt.Fprintf(b.o.Output, format, a...) }

// stageState is a stage as its steps leave it.
type stageState struct {
	img    *sbx.Image // the image the next step starts from
	cfg    sbx.ImageConfig
	key    string
	sc     *scope
	cmdSet bool // CMD was set in this stage
}

// chain is the key of a step after prev: a hash of prev and the step.
func chain(prev string, step any) string {
	data, _ := json.Marshal(step)
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// stage builds the stage i, the n-th of total.
func (b *builder) stage(ctx context.Context, i, n, total int) (*stageState, error) {
	st := b.f.stages[i]
	gs := &scope{lex: b.lex, args: b.args.global}
	base, err := gs.word(st.BaseName)
	if err != nil {
		return nil, fmt.Errorf("%w: %s line %d: FROM: %v", sbx.ErrInvalid, b.f.name, lineOf(st), err)
	}
	if st.Platform != "" {
		p, err := gs.word(st.Platform)
		if err != nil || (p != "linux/"+runtime.GOARCH && p != "") {
			return nil, fmt.Errorf("%w: %s line %d: FROM --platform=%s: sbx build builds for linux/%s only", sbx.ErrInvalid, b.f.name, lineOf(st), p, runtime.GOARCH)
		}
	}
	steps := len(st.Commands) + 1
	b.printf("[%d/%d] STEP 1/%d: %s\n", n, total, steps, st.SourceCode)
	b.steps++
	s := &stageState{}
	if j, ok := b.f.stageIndex(base); ok && j < i && b.results[j] != nil {
		prev := b.results[j]
		s.img, s.cfg = prev.img, cloneConfig(prev.cfg)
	} else if strings.EqualFold(base, "scratch") {
		s.cfg = sbx.ImageConfig{Env: []string{"PATH=" + sbx.DefaultPath}}
		img, err := b.eng.Scratch(ctx, sbx.BuildPrefix+":scratch", s.cfg)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: FROM scratch: %w", b.f.name, lineOf(st), err)
		}
		s.img = img
	} else {
		img, err := b.eng.Image(ctx, base, b.o.Pull)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: FROM %s: %w", b.f.name, lineOf(st), base, err)
		}
		s.img = img
		if img.Config != nil {
			s.cfg = cloneConfig(*img.Config)
		}
	}
	s.key = chain(keyVersion, s.img.Digest)
	s.sc = &scope{lex: b.lex, args: map[string]string{}, env: s.cfg.Env}
	cmds := st.Commands
	if len(s.cfg.OnBuild) > 0 {
		// The base's ONBUILD triggers run first, and go no further.
		var triggers []instructions.Command
		for _, expr := range s.cfg.OnBuild {
			c, err := parseTrigger(expr)
			if err == nil {
				err = b.f.supported(c)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %s line %d: ONBUILD of %s: %v", sbx.ErrInvalid, b.f.name, lineOf(st), base, err)
			}
			triggers = append(triggers, c)
		}
		b.printf("[%d/%d] running %d ONBUILD trigger(s) of %s\n", n, total, len(triggers), base)
		cmds = append(triggers, cmds...)
		s.cfg.OnBuild = nil
		s.key = chain(s.key, struct{ Op string }{"ONBUILD-CLEAR"})
	}
	steps = len(cmds) + 1
	for k, c := range cmds {
		b.printf("[%d/%d] STEP %d/%d: %s\n", n, total, k+2, steps, code(c))
		b.steps++
		t0 := time.Now()
		cached, err := b.step(ctx, s, c)
		if err != nil {
			return nil, err
		}
		switch {
		case cached:
			b.cached++
			b.printf(" ---> CACHED\n")
		case isLayerStep(c):
			b.printf(" ---> %.2fs\n", time.Since(t0).Seconds())
		}
		s.sc.env = s.cfg.Env
	}
	// The stage's config, kept with its last layer.
	name := sbx.BuildPrefix + ":" + s.key
	if !sameConfig(s.img.Config, s.cfg) {
		img, err := b.cachedOr(ctx, s.key, func() (*sbx.Image, error) {
			return b.eng.Configure(ctx, s.img.Digest, name, s.cfg, "sbx build: config")
		})
		if err != nil {
			return nil, err
		}
		s.img = img
	}
	return s, nil
}

func lineOf(st instructions.Stage) int {
	if len(st.Location) > 0 {
		return st.Location[0].Start.Line
	}
	return 0
}

// code is a command as written.
func code(c instructions.Command) string {
	if s, ok := c.(fmt.Stringer); ok {
		return s.String()
	}
	return strings.ToUpper(c.Name())
}

func isLayerStep(c instructions.Command) bool {
	switch c.(type) {
	case *instructions.RunCommand, *instructions.CopyCommand, *instructions.AddCommand, *instructions.WorkdirCommand:
		return true
	}
	return false
}

func cloneConfig(c sbx.ImageConfig) sbx.ImageConfig {
	c.Entrypoint, c.Cmd, c.Env = slices.Clone(c.Entrypoint), slices.Clone(c.Cmd), slices.Clone(c.Env)
	c.ExposedPorts, c.Volumes, c.Shell = slices.Clone(c.ExposedPorts), slices.Clone(c.Volumes), slices.Clone(c.Shell)
	if c.Labels != nil {
		l := make(map[string]string, len(c.Labels))
		for k, v := range c.Labels {
			l[k] = v
		}
		c.Labels = l
	}
	if c.Healthcheck != nil {
		h := *c.Healthcheck
		h.Test = slices.Clone(h.Test)
		c.Healthcheck = &h
	}
	return c
}

func sameConfig(a *sbx.ImageConfig, b sbx.ImageConfig) bool {
	if a == nil {
		a = &sbx.ImageConfig{}
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// cachedOr returns the step image of key, from the cache unless the build
// asks for none, else made by make under the step's lock.
func (b *builder) cachedOr(ctx context.Context, key string, make func() (*sbx.Image, error)) (*sbx.Image, error) {
	name := sbx.BuildPrefix + ":" + key
	if !b.o.NoCache {
		if img, err := b.eng.Cached(ctx, name); err != nil || img != nil {
			return img, err
		}
	}
	unlock, err := b.eng.LockStep(ctx, key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !b.o.NoCache {
		if img, err := b.eng.Cached(ctx, name); err != nil || img != nil {
			return img, err
		}
	}
	return make()
}

// inSandbox runs work in a build sandbox made from s's image with the
// options o (image and labels set here), and commits its layer as the
// step image of key with s's config. The sandbox is removed on every path.
func (b *builder) inSandbox(ctx context.Context, s *stageState, key, createdBy string, o sbx.Options, work func(*sbx.Sandbox, *client.Client) error) (cached bool, err error) {
	return b.inSandboxMounts(ctx, s, key, createdBy, o, nil, work)
}

// inSandboxMounts is inSandbox for a step whose mounts (volumes and tmpfs
// of o) are at the in-sandbox paths drop, which stay out of its layer.
// prepare, when set, runs only when the step is not cached, before the
// sandbox is made: it sets up the mounts.
func (b *builder) inSandboxMounts(ctx context.Context, s *stageState, key, createdBy string, o sbx.Options, prepare func(*sbx.Options) (drop []string, cleanup func(), err error), work func(*sbx.Sandbox, *client.Client) error) (cached bool, err error) {
	hit := true
	img, err := b.cachedOr(ctx, key, func() (_ *sbx.Image, err error) {
		hit = false
		var drop []string
		if prepare != nil {
			d, cleanup, err := prepare(&o)
			if err != nil {
				return nil, err
			}
			defer cleanup()
			drop = d
		}
		o.Image = s.img.Digest
		o.Labels = map[string]string{"sbx.build": key}
		if o.Network == "" {
			o.Network = sbx.NetworkNone
		}
		// Steps run in the host's user namespace: their layers, cache
		// and bind mounts keep the host's ids, as the image will.
		if o.UserNS == "" {
			o.UserNS = sbx.UserNSHost
		}
		sb, err := b.eng.Create(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("build sandbox: %w", err)
		}
		defer func() {
			if rerr := b.eng.Remove(context.WithoutCancel(ctx), sb.ID, sbx.RemoveOptions{Force: true}); rerr != nil && err == nil {
				err = fmt.Errorf("remove the build sandbox: %w", rerr)
			}
		}()
		cl := client.NewWithDialer(func(ctx context.Context) (net.Conn, error) { return b.eng.Dial(ctx, sb.ID) }, client.Options{})
		defer cl.Close()
		if err := work(sb, cl); err != nil {
			return nil, err
		}
		return b.eng.CommitStep(ctx, sb.ID, sbx.BuildPrefix+":"+key, s.cfg, createdBy, drop)
	})
	if err != nil {
		return false, err
	}
	s.img, s.key = img, key
	return hit, nil
}

// errStep is a step's failure, with the Dockerfile's line.
func (b *builder) errStep(c instructions.Command, err error) error {
	var se *stepError
	if errors.As(err, &se) {
		return err
	}
	return &stepError{msg: fmt.Sprintf("%s line %d: %s", b.f.name, line(c), code(c)), err: err}
}

// stepError is a failed step: where, and why.
type stepError struct {
	msg string
	err error
}

func (e *stepError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }
