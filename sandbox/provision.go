package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/cgroup"
	"github.com/sbxrun/sbx/imagecache"
	"github.com/sbxrun/sbx/internal/errkind"
	"github.com/sbxrun/sbx/isolate"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
	"golang.org/x/sys/unix"
)

// The pipeline every sandbox takes, long-lived (Create) or one-shot (Run):
// resolve the root (resolveRoot), attach the network and mount the root
// (provision), describe the container (containerSpec). Only PID 1
// differs: the executor for Create, sbx's small init running the command
// for Run.

// resolvedRoot is what a sandbox's root is made of: image layers, a host
// directory, or nothing (host mode).
type resolvedRoot struct {
	lowers []string         // read-only layers, lowest first; empty in host mode
	info   *sbx.ImageInfo   // the image, when there is one
	config *sbx.ImageConfig // the image's config, when there is one
}

// resolveRoot resolves o's image (pulling it as o.Pull or the host's
// policy says) or checks its root directory. With an image it returns with
// the image store held, so that a concurrent image GC cannot remove the
// layers before the caller protects them (a record naming them, or their
// mount); release is never nil and must be called.
func (h *Host) resolveRoot(ctx context.Context, o *sbx.Options, progress func(sbx.PullProgress)) (resolvedRoot, func(), error) {
	noop := func() {}
	switch {
	case o.Rootfs != "":
		fi, err := os.Stat(o.Rootfs)
		if err != nil {
			return resolvedRoot{}, noop, fmt.Errorf("%w: root directory: %w", sbx.ErrInvalid, err)
		}
		if !fi.IsDir() {
			return resolvedRoot{}, noop, fmt.Errorf("%w: root directory %s is not a directory", sbx.ErrInvalid, o.Rootfs)
		}
		return resolvedRoot{lowers: []string{o.Rootfs}}, noop, nil
	case o.Image == "":
		return resolvedRoot{}, noop, nil // host mode
	}
	store, err := h.imageStore()
	if err != nil {
		return resolvedRoot{}, noop, err
	}
	pull := o.Pull
	if pull == "" {
		pull = h.cfg.Pull
	}
	policy, err := imagecache.ParsePullPolicy(pull)
	if err != nil {
		return resolvedRoot{}, noop, fmt.Errorf("%w: %w", sbx.ErrInvalid, err)
	}
	release, err := store.Hold(ctx)
	if err != nil {
		return resolvedRoot{}, noop, fmt.Errorf("hold the image store: %w", err)
	}
	var pf imagecache.ProgressFunc
	if progress != nil {
		pf = func(p imagecache.Progress) { progress(pullProgress(p)) }
	}
	img, err := store.Ensure(ctx, o.Image, policy, pf)
	if err != nil {
		release()
		if errors.Is(err, sbx.ErrImageNotFound) && policy == imagecache.PullNever {
			// Nothing was pulled: say so once, without the cache's own hint.
			return resolvedRoot{}, noop, errkind.Of(fmt.Sprintf("image %q is not in the cache and the pull policy is never: sbx pull %s or sbx import it", o.Image, o.Image),
				sbx.ErrInvalid, sbx.ErrImageNotFound)
		}
		if errors.Is(err, sbx.ErrImageNotFound) {
			return resolvedRoot{}, noop, fmt.Errorf("%w: image %q is not in the cache and could not be pulled: %w (sbx pull or sbx import it)", sbx.ErrInvalid, o.Image, err)
		}
		return resolvedRoot{}, noop, err
	}
	cfg := img.Config.Contract()
	publishExposed(o, cfg)
	lowers := img.LayerDirs
	if len(lowers) == 0 {
		// An image without layers (a build's FROM scratch) is an empty
		// root, not host mode: its one lower is an empty directory.
		empty := filepath.Join(h.store.Root(), "empty-root")
		if err := os.MkdirAll(empty, 0o755); err != nil {
			release()
			return resolvedRoot{}, noop, fmt.Errorf("the empty root of image %s: %w", o.Image, err)
		}
		lowers = []string{empty}
	}
	return resolvedRoot{
		lowers: lowers,
		config: cfg,
		info: &sbx.ImageInfo{Ref: imagecache.FamiliarName(img.Name), Digest: img.Digest, Layers: img.LayerDirs,
			Env: cfg.Env, Workdir: cfg.WorkingDir, User: cfg.User, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd},
	}, release, nil
}

// checkWorkdir refuses a working directory that a lower layer of o's
// root has as a file (or has a file on its path): making it in the
// writable layer would hide that file under a directory.
func checkWorkdir(o *sbx.Options, lowers []string) error {
	if o.Workdir == "" || len(lowers) == 0 {
		return nil
	}
	what := "the image"
	if o.Rootfs != "" {
		what = "root directory " + o.Rootfs
	}
	f, err := rootfs.FileOnPath(lowers, o.Workdir)
	if errors.Is(err, unix.ENAMETOOLONG) {
		return fmt.Errorf("%w: working directory %s in %s: %w; give another directory, or no --workdir for the image's", sbx.ErrInvalid, o.Workdir, what, err)
	}
	if err != nil {
		return fmt.Errorf("look up working directory %s in %s: %w", o.Workdir, what, err)
	}
	if f == "" {
		return nil
	}
	return fmt.Errorf("%w: working directory %s is not a directory in %s (%s is a file there); give a directory, or no --workdir for the image's", sbx.ErrInvalid, o.Workdir, what, f)
}

// provisioned is one sandbox's network and root, as provision made them.
// diskLayerDir holds, in a sandbox's state directory, its writable layer
// when Options.DiskBacking is disk.
const diskLayerDir = "rw"

type provisioned struct {
	id, hostname string
	opts         *sbx.Options
	member       bool     // a warm pool's member: its network keeps a standby port holder
	lowers       []string // empty: host mode
	dir          string   // where the root is prepared

	// usernsOwner names the lease of the user namespace id range of a
	// sandbox in a private one ("" otherwise); uns is its namespace, held
	// until the container has joined it (close it with closeUserNS).
	usernsOwner string
	uns         *usernsHandle
	// seed fills the writable layer first (a restore's), if set.
	seed func(upper string) error

	net      *netns.Attachment
	bridged  bool // net is a bridge attachment, to detach on release
	root     *rootfs.Root
	networkS float64
	fromPool bool
	rootfsS  float64
	usernsS  float64
}

// closeUserNS lets go of the user namespace's handle (the namespace lives
// on in the sandbox's processes).
func (p *provisioned) closeUserNS() {
	if p.uns != nil {
		p.uns.ns.Close()
		p.uns = nil
	}
}

// provision attaches the sandbox's network (one way for every mode: a
// bridge attachment, or the local files of modes none and host) and mounts
// its root with the /etc/hosts and /etc/resolv.conf of that attachment.
// crash is called at the create steps in between.
func (h *Host) provision(ctx context.Context, p *provisioned, crash func(step string)) error {
	if err := h.attachNetwork(ctx, p); err != nil {
		return err
	}
	return h.prepareRoot(p, crash)
}

// attachNetwork is provision's first half: the sandbox's network, made in
// the host's namespaces.
func (h *Host) attachNetwork(ctx context.Context, p *provisioned) error {
	t0 := time.Now()
	na, err := parseNetwork(p.opts, p.hostname)
	if err != nil {
		return err
	}
	if na.Mode == netns.ModeBridge {
		n, err := h.network()
		if err != nil {
			return err
		}
		p.bridged = true // the lease is recorded on disk before anything is created
		na.Standby = p.member
		if p.net, err = n.Attach(ctx, p.id, na); err != nil {
			return err
		}
		if na.Egress.Names.HasNames() {
			if err := h.ensureEgress(ctx); err != nil {
				return err
			}
		}
		p.networkS, p.fromPool = time.Since(t0).Seconds(), p.net.FromPool
	} else {
		p.net = netns.LocalAttachment(p.id, na.Mode, p.hostname, "")
	}
	return nil
}

// prepareRoot is provision's second half: the sandbox's root, mounted in
// the mount namespace of the calling thread (a sandbox's own, for a
// long-lived sandbox: see Host.build).
func (h *Host) prepareRoot(p *provisioned, crash func(step string)) (err error) {
	t0 := time.Now()
	crash(stepRootfs)
	if p.opts.UserNS == sbx.UserNSPrivate {
		tu := time.Now()
		if p.uns, err = newUserNS(h.cfg.UserNSDir, p.usernsOwner); err != nil {
			return err
		}
		p.usernsS = time.Since(tu).Seconds()
	}
	var dirs []string
	if p.opts.Workdir != "" {
		dirs = []string{p.opts.Workdir}
	}
	ro := rootfs.Options{
		DiskBytes:  p.opts.Limits.DiskBytes,
		Hostname:   p.hostname,
		Hosts:      p.net.Hosts + sbx.ExtraHostsLines(p.opts.ExtraHosts),
		ResolvConf: p.net.ResolvConf,
		Dirs:       dirs,
		MountDirs:  []string{"/.sbx"},
		Seed:       p.seed,
	}
	if p.opts.DiskBacking == sbx.DiskBackingDisk {
		// In the sandbox's state directory: removed with its record.
		ro.DiskDir = filepath.Join(h.store.Dir(p.id), diskLayerDir)
	}
	if p.uns != nil {
		ro.UserNS = &rootfs.UserNS{NS: p.uns.ns, HostID: p.uns.rng.HostID}
	}
	if len(p.lowers) > 0 {
		p.root, err = rootfs.Prepare(p.dir, p.lowers, ro)
	} else {
		p.root, err = rootfs.PrepareHost(p.dir, ro)
	}
	if err != nil {
		return err
	}
	if p.uns != nil {
		// libcontainer's init, already in the namespace, opens the root by
		// its host path.
		if err := rootfs.ReachableBy(h.store.RunRoot(), filepath.Dir(p.dir), p.root.Path, p.uns.rng.HostID); err != nil {
			return err
		}
	}
	p.rootfsS = time.Since(t0).Seconds()
	return nil
}

// containerSpec describes the sandbox's container: its root, identity,
// capabilities, seccomp filter (loaded by sbx's own PID 1), cgroup limits
// (with PID 1's allowance), network, and mounts: binds (sbx's binaries),
// then the root's own, then the volumes and tmpfs mounts of the options.
func containerSpec(p *provisioned, args, env []string, cwd string, u rootfs.User, binds []specs.Mount) *isolate.Spec {
	mounts := append(append(binds, p.root.Mounts...), volumeMounts(p.opts, p.uns != nil)...)
	gids := make([]uint32, 0, len(u.AdditionalGroups))
	for _, g := range u.AdditionalGroups {
		gids = append(gids, uint32(g))
	}
	return &isolate.Spec{
		ID:             p.id,
		Rootfs:         p.root.Path,
		ReadonlyRootfs: p.opts.ReadonlyRootfs,
		Args:           args,
		Env:            env,
		Cwd:            cwd,
		UID:            uint32(u.UID),
		GID:            uint32(u.GID),
		AdditionalGIDs: gids,
		Hostname:       p.hostname,
		CapAdd:         p.opts.CapAdd,
		CapDrop:        p.opts.CapDrop,
		Seccomp:        p.opts.Seccomp,
		Limits: cgroup.Limits{
			MemoryBytes: p.opts.Limits.MemoryBytes,
			CPUs:        p.opts.Limits.CPUs,
			Pids:        p.opts.Limits.Pids,
		}.WithInitAllowance(),
		Rlimits:       ociRlimits(p.opts.Ulimits),
		ShmBytes:      p.opts.ShmSizeBytes,
		HelperSeccomp: true,
		Network:       isolateNetwork(p.net),
		Mounts:        mounts,
		UserNS:        p.uns.spec(),
	}
}

// isolateNetwork is the network of a sandbox's container.
func isolateNetwork(a *netns.Attachment) string {
	switch {
	case a != nil && a.NetNSPath != "":
		return a.NetNSPath
	case a != nil && a.Mode == netns.ModeHost:
		return isolate.NetworkHost
	}
	return isolate.NetworkNone
}

// readOnlyBind bind-mounts a host file read-only at target.
func readOnlyBind(source, target string, extra ...string) specs.Mount {
	return specs.Mount{Source: source, Destination: target, Type: "bind", Options: append([]string{"bind", "ro", "nodev", "nosuid"}, extra...)}
}

// volumeMounts turns volumes and tmpfs mounts into OCI mounts. In a
// private user namespace (userns) a volume is bound as it is: the
// sandbox's ids are its host range there too, so what it creates belongs
// to that range and host files outside it are not its own; only a volume
// with idmap=host is id-mapped back onto the host's ids (host files of
// uid 0 show as the sandbox's root, which writes as host uid 0).
func volumeMounts(o *sbx.Options, userns bool) []specs.Mount {
	var out []specs.Mount
	for _, v := range o.Volumes {
		opts := []string{"rbind", "nosuid", "nodev"}
		if v.ReadOnly {
			opts = append(opts, "ro")
		}
		if userns && v.IDMap == sbx.VolumeIDMapHost {
			opts = append(opts, "ridmap")
		}
		out = append(out, specs.Mount{Source: v.HostPath, Destination: v.Path, Type: "bind", Options: opts})
	}
	for _, t := range o.Tmpfs {
		opts := []string{"nosuid", "nodev", "mode=1777"}
		if t.SizeBytes > 0 {
			opts = append(opts, "size="+strconv.FormatInt(t.SizeBytes, 10))
		}
		out = append(out, specs.Mount{Source: "tmpfs", Destination: t.Path, Type: "tmpfs", Options: opts})
	}
	return out
}

// processEnv completes a process's environment as docker does: PATH,
// HOSTNAME, HOME for the user, TERM with a terminal.
func processEnv(env []string, hostname string, tty bool, home string) []string {
	has := map[string]bool{}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		has[k] = true
	}
	out := append([]string{}, env...)
	add := func(k, v string) {
		if !has[k] {
			out = append(out, k+"="+v)
		}
	}
	add("PATH", sbx.DefaultPath)
	add("HOSTNAME", hostname)
	if home == "" {
		home = "/"
	}
	add("HOME", home)
	if tty {
		add("TERM", "xterm")
	}
	return out
}

// pullProgress is the contract's form of a progress report.
func pullProgress(p imagecache.Progress) sbx.PullProgress {
	return sbx.PullProgress{Layer: p.Layer, Index: p.Index, Count: p.Count, Phase: string(p.Phase), CurrentBytes: p.Current, TotalBytes: p.Total}
}
