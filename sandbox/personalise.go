package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/netns"
	"github.com/sbxrun/sbx/rootfs"
)

// Claim-time personalisation: what a create asks for beyond a warm pool's
// key is applied to the running member before the create returns, from
// the host, without waiting for the member's executor: the hostname in its
// UTS namespace, the egress rules, allowed host ports and name servers of
// its network, its /etc/hostname, hosts and resolv.conf, the volumes and
// tmpfs mounts of the create, made with the new mount API and moved into
// its mount namespace (rootfs.MountLive), and the environment, working
// directory and user of later commands, written into the file the
// member's executor reads them from before its next request
// (writeClaimDefaults). The member never ran code of anyone, so nothing
// in it is to be undone; whatever fails, the member is discarded.

// personalisation is what personalise applies to a claimed member beyond
// the key and the network, with what is made for it ahead on the host
// (the member's PID 1 opened, the mounts' detached trees), which the
// member does not see.
type personalisation struct {
	newHost string // the hostname, if it changes
	resize  bool   // the writable layer's size changes
	mounts  []rootfs.LiveMount
	// oldDefaults are the member's command defaults; the claimant's,
	// known once the egress step has added its variables, go to the
	// executor if they differ.
	oldDefaults execapi.Defaults
	pm          *member
	trees       *rootfs.Detached
}

// preparePersonalise works out what personalise applies to the claimed
// member m (its record as a member) for sb (its record as claimed), and
// makes ahead what it can without changing the member: with a hostname,
// mounts or command defaults to apply, its PID 1 opened (and its
// executor's claim defaults file), and the mounts' detached trees, made
// here, in the host's mount namespace (volume sources are host paths).
// Close the result.
func preparePersonalise(m, sb *sbx.Sandbox) (*personalisation, error) {
	p := &personalisation{resize: m.Options.Limits.DiskBytes != sb.Options.Limits.DiskBytes, mounts: liveMounts(&sb.Options),
		oldDefaults: commandDefaults(m)}
	if hostname(sb) != hostname(m) {
		p.newHost = hostname(sb)
	}
	defaults := claimEgressState(&sb.Options) || !sameDefaults(p.oldDefaults, commandDefaults(sb))
	if p.newHost == "" && len(p.mounts) == 0 && !defaults {
		return p, nil
	}
	var err error
	if p.pm, err = openMember(m, defaults); err != nil {
		return nil, err
	}
	if p.trees, err = rootfs.DetachMounts(p.mounts, p.pm.userns); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// live says whether the hostname or mounts change: applied from inside
// the member's namespaces.
func (p *personalisation) live() bool { return p.newHost != "" || len(p.mounts) > 0 }

func (p *personalisation) close() {
	if p.trees != nil {
		p.trees.Close()
	}
	if p.pm != nil {
		p.pm.close()
	}
}

// startPersonalise starts applying p to the claimed member sb: the
// writable layer's size, the hostname, the /etc files etc (claimNetwork's)
// and the mounts, partly on rootfs's kept namespace thread, and returns
// once that thread has its part (wait waits for all of it); the caller
// applies the rest meanwhile.
func (h *Host) startPersonalise(p *personalisation, sb *sbx.Sandbox, etc rootfs.Options, tr *claimTrace) (wait func() error) {
	if p.newHost != "" {
		etc.Hostname = p.newHost
	}
	live, resize, pm := p.live(), p.resize, p.pm
	writeEtc := etc.Hostname != "" || etc.Hosts != "" || etc.ResolvConf != ""
	if !live && !resize && !writeEtc {
		return func() error { return nil }
	}
	// A writable root of the container's own (an overlay over an image or
	// a root directory: not host mode, not --read-only) is reached from
	// any thread through its PID 1's root: the kept thread
	// is woken first for the mountpoints there and what needs the
	// namespaces (the hostname, the mounts' move, a resize), and the /etc
	// files are written here while it wakes.
	if pm != nil && (sb.Options.Image != "" || sb.Options.Rootfs != "") && !sb.Options.ReadonlyRootfs {
		var waitNS func() error
		if live || resize {
			waitNS = h.startNSWork(sb, resize && h.mountNS.Has(sb.ID), resize, p, "", rootfs.Options{}, tr)
		}
		var err error
		if writeEtc {
			err = tr.side("p-etc", func() error { return rootfs.RewriteEtcIn(pm.root, etc) })
		}
		return func() error {
			if waitNS != nil {
				err = errors.Join(err, waitNS())
			}
			return err
		}
	}
	run := filepath.Join(h.store.RunDir(sb.ID), rootfsDir)
	root := filepath.Join(run, "root")
	if sb.RootPath != "" {
		root = sb.RootPath
	}
	// Otherwise one thread does it all. In the sandbox's own mount
	// namespace, where its root is mounted writable (a read-only root is a
	// read-only bind in its container's), it remounts the writable layer,
	// writes the /etc files and makes the mountpoints; then it joins the
	// container's mount and UTS namespaces at once, sets the hostname and
	// moves the mounts in.
	inPinned := h.mountNS.Has(sb.ID)
	if !inPinned && !live {
		err := h.nsWork(sb, resize, p, root, etc, tr)
		return func() error { return err }
	}
	return h.startNSWork(sb, inPinned, resize, p, root, etc, tr)
}

// startNSWork starts, on rootfs's kept namespace thread (which goes back
// to the host's namespaces afterwards: no thread is made and ended per
// claim), the part of a claim's personalisation that needs the sandbox's
// namespaces (nsWork), in its own mount namespace first if inPinned.
func (h *Host) startNSWork(sb *sbx.Sandbox, inPinned, resize bool, p *personalisation, root string, etc rootfs.Options, tr *claimTrace) (wait func() error) {
	t0 := time.Now()
	work := func() error {
		tr.since("p-enter", t0)
		return h.nsWork(sb, resize, p, root, etc, tr)
	}
	if inPinned {
		return h.mountNS.StartVisit(sb.ID, work)
	}
	return rootfs.StartVisit("", work)
}

// nsWork resizes sb's writable layer (with resize), writes the /etc files
// etc into root and makes the mountpoints there (without root: the
// mountpoints in the member's root, writable, through its PID 1's), sets
// the hostname and moves the mounts in (p's).
func (h *Host) nsWork(sb *sbx.Sandbox, resize bool, p *personalisation, root string, etc rootfs.Options, tr *claimTrace) error {
	if resize {
		run := filepath.Join(h.store.RunDir(sb.ID), rootfsDir)
		if err := tr.side("p-resize", func() error { return rootfs.Resize(run, sb.Options.Limits.DiskBytes) }); err != nil {
			return err
		}
	}
	if root != "" && (etc.Hostname != "" || etc.Hosts != "" || etc.ResolvConf != "") {
		if err := tr.side("p-etc", func() error { return rootfs.RewriteEtc(root, etc) }); err != nil {
			return err
		}
	}
	if !p.live() {
		return nil
	}
	err := tr.side("p-targets", func() error {
		if root == "" {
			return rootfs.PrepareTargetsIn(p.pm.root, p.mounts)
		}
		return rootfs.PrepareTargets(root, p.mounts)
	})
	if err != nil {
		return err
	}
	return tr.side("p-move", func() error { return p.trees.MoveInto(p.pm.pidfd, p.pm.root, p.newHost) })
}

// claimNetwork decides the network of the claimed sandbox sb (m as a
// member): its published ports, egress policy, allowed host ports, name
// servers and hostname (of /etc/hosts). On a bridged network that is one
// netns.Reconfigure, which chooses the ports and changes nothing until
// the returned claimedNetwork is applied (then the lease records it first,
// and the rules change in one batch); sb.Network says what it will be.
// An error of claimNetwork is the request's when it is sbx.ErrInvalid or
// sbx.ErrPortInUse; on any error the network is as it was.
func (h *Host) claimNetwork(ctx context.Context, m, sb *sbx.Sandbox) (*claimedNetwork, error) {
	newHost, changed := networkChanges(m, sb)
	if !newHost && !changed {
		return &claimedNetwork{}, nil
	}
	na, err := parseNetwork(&sb.Options, hostname(sb))
	if err != nil {
		return nil, err
	}
	if na.Mode != netns.ModeBridge {
		if !newHost {
			return &claimedNetwork{}, nil
		}
		a := netns.LocalAttachment(sb.ID, na.Mode, hostname(sb), "")
		return &claimedNetwork{etc: rootfs.Options{Hosts: a.Hosts + sbx.ExtraHostsLines(sb.Options.ExtraHosts)}}, nil
	}
	n, err := h.network()
	if err != nil {
		return nil, err
	}
	r, err := n.Reconfigure(ctx, sb.ID, na)
	if err != nil {
		return nil, err
	}
	sb.Network = networkInfo(r.Attachment)
	cn := &claimedNetwork{etc: rootfs.Options{Hosts: r.Hosts + sbx.ExtraHostsLines(sb.Options.ExtraHosts)}, r: r}
	if changed {
		cn.etc.ResolvConf = r.ResolvConf
	}
	if na.Egress.Names.HasNames() {
		// The egress daemon listens before the claimant's first command.
		cn.after = func() error { return h.ensureEgress(ctx) }
	}
	return cn, nil
}

// networkChanges says whether the claim sb of member m changes /etc/hosts
// (the hostname, the extra hosts), and whether it changes the rest of the
// network (ports, egress policy, allowed host ports, name servers).
func networkChanges(m, sb *sbx.Sandbox) (newHost, changed bool) {
	newHost = hostname(sb) != hostname(m) || !slices.Equal(sb.Options.ExtraHosts, m.Options.ExtraHosts)
	changed = len(sb.Options.Publish) > 0 || sb.Options.Egress != m.Options.Egress || sb.Options.EgressPolicy != "" || len(sb.Options.Secrets) > 0 ||
		!slices.Equal(sb.Options.AllowHostPorts, m.Options.AllowHostPorts) || !slices.Equal(sb.Options.DNS, m.Options.DNS)
	return newHost, changed
}

// claimedNetwork is the network of a claim, decided by claimNetwork: the
// /etc files to write into the sandbox and, on a bridged network, the
// change of its lease and rules, to apply or to abort.
type claimedNetwork struct {
	etc   rootfs.Options
	r     *netns.Reconfiguring
	after func() error // once the rules are in, if not nil
}

// apply makes the change of the lease and rules; wait returns how it went.
func (c *claimedNetwork) apply() {
	if c.r != nil {
		c.r.Apply()
	}
}

// abort gives up a change not applied: the network stays as it was.
func (c *claimedNetwork) abort() {
	if c.r != nil {
		c.r.Abort()
	}
}

// wait applies the change if apply was not called and waits until the
// sandbox's lease and rules are the new ones (on error, as they were).
func (c *claimedNetwork) wait() error {
	if c.r == nil {
		return nil
	}
	if err := c.r.Wait(); err != nil {
		return err
	}
	if c.after != nil {
		return c.after()
	}
	return nil
}

// liveMounts are the volumes and tmpfs mounts of o as mounts made in a
// running sandbox.
func liveMounts(o *sbx.Options) []rootfs.LiveMount {
	var out []rootfs.LiveMount
	for _, v := range o.Volumes {
		out = append(out, rootfs.LiveMount{Source: v.HostPath, Target: v.Path, ReadOnly: v.ReadOnly, HostIDs: v.IDMap == sbx.VolumeIDMapHost})
	}
	for _, t := range o.Tmpfs {
		out = append(out, rootfs.LiveMount{Target: t.Path, SizeBytes: t.SizeBytes})
	}
	return out
}

// member holds a running member's PID 1 by a pidfd, with its root
// directory, (with a private user namespace) its user namespace and (if
// asked for) its executor's claim defaults file, all opened while that
// very process was alive.
type member struct {
	pidfd    int
	root     *os.File
	userns   int
	defaults *os.File
}

// openMember opens m's PID 1: a pidfd checked against the recorded start
// time (so a reused PID is refused), then its root, user namespace and,
// with defaults, the file its executor reads its claimant's command
// defaults from (claimDefaultsFD), and checks that the process still
// lives (so they are its own).
func openMember(m *sbx.Sandbox, defaults bool) (*member, error) {
	pidfd, err := unix.PidfdOpen(m.Pid, 0)
	if err != nil {
		return nil, fmt.Errorf("open PID 1 of pool member %s: %w", m.ShortID(), err)
	}
	pm := &member{pidfd: pidfd, userns: -1}
	if !pid1Alive(m) {
		pm.close()
		return nil, fmt.Errorf("PID 1 of pool member %s is gone", m.ShortID())
	}
	proc := "/proc/" + strconv.Itoa(m.Pid)
	if pm.root, err = os.OpenFile(proc+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		pm.close()
		return nil, fmt.Errorf("open the root of pool member %s: %w", m.ShortID(), err)
	}
	if m.Options.UserNS == sbx.UserNSPrivate {
		if pm.userns, err = unix.Open(proc+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			pm.close()
			return nil, fmt.Errorf("open the user namespace of pool member %s: %w", m.ShortID(), err)
		}
	}
	if defaults {
		if pm.defaults, err = openClaimDefaults(proc + "/fd/" + strconv.Itoa(claimDefaultsFD)); err != nil {
			pm.close()
			return nil, fmt.Errorf("open the claim defaults file of pool member %s (a member started by an older sbx has none): %w", m.ShortID(), err)
		}
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		pm.close()
		return nil, fmt.Errorf("PID 1 of pool member %s is gone: %w", m.ShortID(), err)
	}
	return pm, nil
}

// openClaimDefaults opens for writing the claim defaults file a pool
// member's executor holds at path (/proc/PID/fd/N). The executor is
// hostile: it may hold anything there, a FIFO, a terminal, a file of a
// volume or /proc or /sys, and the open is the host's (root, any file
// mode). So the file is first opened as a path only (O_PATH: no device's
// open runs, no terminal becomes the host's controlling one, nothing
// blocks) and opened for writing only if it is an empty memfd (any
// memfd: they all live on the kernel's one internal tmpfs), which no one
// but the sandbox can see.
func openClaimDefaults(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	dev, err := memfdDev()
	if err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != 0 || st.Dev != dev {
		return nil, errors.New("it is not an empty memfd")
	}
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// memfdDev is the device of every memfd's inode.
var memfdDev = sync.OnceValues(func() (uint64, error) {
	fd, err := unix.MemfdCreate("sbx-memfd-dev", unix.MFD_CLOEXEC)
	if err != nil {
		return 0, fmt.Errorf("memfd: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("memfd: %w", err)
	}
	return st.Dev, nil
})

func (pm *member) close() {
	unix.Close(pm.pidfd)
	if pm.defaults != nil {
		pm.defaults.Close()
	}
	if pm.root != nil {
		pm.root.Close()
	}
	if pm.userns >= 0 {
		unix.Close(pm.userns)
	}
}

// claimOrReason claims a member for o as claim does, or says why none
// could serve it.
func (h *Host) claimOrReason(ctx context.Context, o *sbx.Options, img *sbx.ImageInfo, t0 time.Time) (*sbx.Sandbox, string, error) {
	sb, err := h.claim(ctx, o, img, t0)
	if sb != nil || err != nil {
		return sb, "", err
	}
	return nil, h.missReason(ctx, o, img), nil
}

// missReason says why no pool member could serve o (with img, nil for a
// root directory): the pool whose key is nearest and what differs, or
// that the matching pool has no ready member.
func (h *Host) missReason(ctx context.Context, o *sbx.Options, img *sbx.ImageInfo) string {
	names, err := h.poolNames()
	if err != nil || len(names) == 0 {
		return "no pool defined"
	}
	best, bestDiff := "", []string(nil)
	sameImage := false
	for _, name := range names {
		d, err := h.readPoolDef(name)
		if err != nil {
			continue
		}
		po := d.Spec.Options
		if err := h.checkOptions(&po, true, h.cfg.Policy); err != nil {
			continue
		}
		if !h.sameRoot(ctx, &po, o, img) {
			continue
		}
		sameImage = true
		diff := sbx.PoolKeyDiff(o, &po)
		diff = slices.DeleteFunc(diff, func(s string) bool { return s == "image" || s == "rootfs" })
		if len(po.Cmd) > 0 && !reflect.DeepEqual(bootKey(o), bootKey(&po)) {
			diff = append(diff, "the main command it boots (cmd, env, workdir, user)")
		}
		if best == "" || len(diff) < len(bestDiff) {
			best, bestDiff = name, diff
		}
	}
	switch {
	case !sameImage && o.Rootfs != "":
		return "no pool for root directory " + o.Rootfs
	case !sameImage:
		return "no pool for image " + o.Image
	case len(bestDiff) > 0:
		verb := "differ"
		if len(bestDiff) == 1 {
			verb = "differs"
		}
		return fmt.Sprintf("pool %s: %s %s", best, joinNames(bestDiff), verb)
	}
	return "pool " + best + " has no ready member"
}

// sameRoot reports whether the pool's options po start from the image
// (by digest) or root directory the create's o resolved to.
func (h *Host) sameRoot(ctx context.Context, po, o *sbx.Options, img *sbx.ImageInfo) bool {
	if o.Rootfs != "" || po.Rootfs != "" {
		return po.Rootfs == o.Rootfs
	}
	if img == nil {
		return false
	}
	po.Pull = sbx.PullNever
	pimg, release, err := h.resolveRoot(ctx, po, nil)
	if err != nil {
		return false
	}
	release()
	return pimg.info != nil && pimg.info.Digest == img.Digest
}

// joinNames joins field names for a message: "a", "a and b", "a, b and c".
func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := ""
	for i, n := range names[:len(names)-1] {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out + " and " + names[len(names)-1]
}

// sameDefaults reports whether two sets of command defaults are equal.
func sameDefaults(a, b execapi.Defaults) bool {
	return a.Workdir == b.Workdir && a.User == b.User && slices.Equal(a.Env, b.Env)
}

// writeClaimDefaults hands the claimant's command defaults d to the
// member pm's executor without waiting for it: they go, as JSON, into the
// empty file it was started with (--claim-defaults-fd), which it reads
// and applies before it serves its next request. The file is the
// executor's to read; whatever the executor made of it (it is hostile),
// the host only ever writes to it.
func writeClaimDefaults(pm *member, d execapi.Defaults) error {
	if pm == nil || pm.defaults == nil {
		return errors.New("the claim defaults file of the pool member is not open")
	}
	fi, err := pm.defaults.Stat()
	if err != nil {
		return fmt.Errorf("the claim defaults file of the pool member: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() != 0 {
		return errors.New("the claim defaults file of the pool member is not an empty file")
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := pm.defaults.WriteAt(data, 0); err != nil {
		return fmt.Errorf("write the command defaults to the pool member's executor: %w", err)
	}
	return nil
}
