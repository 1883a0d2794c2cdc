package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	execapi "github.com/sbxrun/sbx/executor/api"
	"github.com/sbxrun/sbx/executor/client"
	"github.com/sbxrun/sbx/sandbox/state"
)

// Pool members with a main command. A pool whose options set Cmd boots
// it in every member before the member is listed as ready: the command
// starts with the pool's Env (plus a key of the member's own in the
// variables KeyEnv names), Workdir and User, and the member becomes
// claimable once the pool's ReadyCheck passes. Cmd, Env and Workdir are
// then part of the pool's key, so only a create that asks for the same
// boot claims such a member, and gets it with the command running.
//
// Claim is the claim a front-end completes itself: it never starts a
// sandbox cold, and it runs the front-end's hook on the claimed member
// (the key in hand) before returning; a member whose hook fails is
// removed, never handed out.

// ErrNoMember is Claim's answer when no idle member of any pool matches.
var ErrNoMember = errors.New("no idle warm-pool member matches the options")

// PoolMember is what a ClaimHook gets: the sandbox Claim took, as Claim
// returns it (running, its record written), and the member's own key
// (PoolSpec.KeyEnv; "" when the pool sets none).
type PoolMember struct {
	Sandbox *sbx.Sandbox
	Key     string
}

// ClaimHook completes a claim before Claim returns, e.g. by handing the
// member's booted server its session. An error removes the member and
// fails the Claim with it.
type ClaimHook func(ctx context.Context, m *PoolMember) error

// memberKeyFile holds a member's key (PoolSpec.KeyEnv) in its state
// directory (0600), for the process that claims it.
const memberKeyFile = "member-key"

// defaultReadyTimeout bounds a ReadyCheck that sets no timeout.
const defaultReadyTimeout = 10 * time.Minute

// bootFields are what a pool with a main command adds to its key.
type bootFields struct {
	Cmd     []string `json:"cmd"`
	Env     []string `json:"env"` // sorted
	Workdir string   `json:"workdir"`
	User    string   `json:"user,omitempty"`
	Restart string   `json:"restart,omitempty"`
}

// bootKey is the boot part of o's pool key: nil without a main command.
func bootKey(o *sbx.Options) *bootFields {
	if len(o.Cmd) == 0 {
		return nil
	}
	var env []string // nil when empty: a create's [] and a pool's none match
	if len(o.Env) > 0 {
		env = slices.Clone(o.Env)
		slices.Sort(env)
	}
	b := &bootFields{Cmd: o.Cmd, Env: env, Workdir: o.Workdir, User: o.User}
	if o.Restart.Restarts() {
		b.Restart = o.Restart.String()
	}
	return b
}

// Claim claims an idle member of a warm pool that matches opts, as Create
// would, and runs hook on it before returning (nil: none). It starts
// nothing cold: with no member to claim it fails with ErrNoMember. A
// member whose hook fails is removed; the error is the hook's.
func (h *Host) Claim(ctx context.Context, opts sbx.Options, hook ClaimHook) (*sbx.Sandbox, error) {
	return h.claimWith(ctx, opts, h.cfg.Policy, hook)
}

// Claim is Host.Claim held to the view's policy.
func (v *PolicyView) Claim(ctx context.Context, opts sbx.Options, hook ClaimHook) (*sbx.Sandbox, error) {
	return v.h.claimWith(ctx, opts, v.policy, hook)
}

func (h *Host) claimWith(ctx context.Context, opts sbx.Options, policy *sbx.Policy, hook ClaimHook) (*sbx.Sandbox, error) {
	if err := h.checkOptions(&opts, true, policy); err != nil {
		return nil, err
	}
	if reason := unclaimableReason(&opts); reason != "" {
		return nil, fmt.Errorf("%w: %s", ErrNoMember, reason)
	}
	t0 := time.Now()
	// A member exists only for an image that is here: never pull.
	ro := opts
	ro.Pull = sbx.PullNever
	img, release, err := h.resolveRoot(ctx, &ro, nil)
	if errors.Is(err, sbx.ErrImageNotFound) || errors.Is(err, sbx.ErrNotFound) {
		return nil, fmt.Errorf("%w (%v)", ErrNoMember, err)
	}
	if err != nil {
		return nil, err
	}
	sb, err := h.claim(ctx, &opts, img.info, t0)
	release()
	if err != nil {
		return nil, err
	}
	if sb == nil {
		return nil, ErrNoMember
	}
	if err := h.startCmdOrRemove(ctx, sb); err != nil {
		return nil, err
	}
	if hook == nil {
		return sb, nil
	}
	key, err := os.ReadFile(filepath.Join(h.store.Dir(sb.ID), memberKeyFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		h.removeClaimed(ctx, sb, "its key is unreadable")
		return nil, fmt.Errorf("read the key of pool member %s: %w", sb.ShortID(), err)
	}
	if err := hook(ctx, &PoolMember{Sandbox: sb, Key: string(key)}); err != nil {
		h.pools.hookFailed(sb.FromPool)
		h.removeClaimed(ctx, sb, "its claim hook failed: "+err.Error())
		return nil, fmt.Errorf("complete the claim of pool member %s: %w", sb.ShortID(), err)
	}
	return sb, nil
}

// removeClaimed removes a claimed member that must not be handed out.
func (h *Host) removeClaimed(ctx context.Context, sb *sbx.Sandbox, why string) {
	h.log.Warn("removing a claimed pool member", "pool", sb.FromPool, "id", sb.ID, "why", why)
	if err := h.Remove(context.WithoutCancel(ctx), sb.ID, sbx.RemoveOptions{Force: true}); err != nil {
		h.log.Warn("remove a claimed pool member", "id", sb.ID, "err", err)
	}
}

// readyMember makes a just-started member of sb.Pool claimable: it boots
// the pool's main command, if any, waits for its ready check, and lists
// the member (markPooled). Called with the member's lock held.
func (h *Host) readyMember(ctx context.Context, l *state.Lock, sb *sbx.Sandbox) error {
	if len(sb.Options.Cmd) == 0 {
		return h.markPooled(l, sb)
	}
	t0 := time.Now()
	err := h.bootMember(ctx, sb)
	h.pools.booted(sb.Pool, time.Since(t0), err)
	if err != nil {
		return fmt.Errorf("boot the main command of a member of pool %q: %w", sb.Pool, err)
	}
	h.log.Info("warm pool member booted", "pool", sb.Pool, "id", sb.ID, "seconds", time.Since(t0).Seconds())
	return h.markPooled(l, sb)
}

// bootMember starts the pool's main command in member sb, with a key of
// its own in the KeyEnv variables, and waits for the ready check.
func (h *Host) bootMember(ctx context.Context, sb *sbx.Sandbox) error {
	d, err := h.readPoolDef(sb.Pool)
	if err != nil {
		return err
	}
	env := map[string]string{}
	if len(d.Spec.KeyEnv) > 0 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		key := hex.EncodeToString(b)
		// Written before the command sees it: a claimant always finds it.
		if err := os.WriteFile(filepath.Join(h.store.Dir(sb.ID), memberKeyFile), []byte(key), 0o600); err != nil {
			return fmt.Errorf("write the member's key: %w", err)
		}
		for _, name := range d.Spec.KeyEnv {
			env[name] = key
		}
	}
	c, _ := h.executor(sb)
	defer c.Close()
	if err := giveWorkdir(ctx, c, sb.Options.Workdir, sb.Options.User); err != nil {
		return err
	}
	spec := execapi.MainCmdSpec{Argv: sb.Options.Cmd, Env: env, Cwd: sb.Options.Workdir, CreateCwd: sb.Options.Workdir != "", User: sb.Options.User}
	restartSpec(&spec, sb.Options.Restart)
	st, err := c.StartMainCmd(ctx, spec)
	if err != nil {
		return fmt.Errorf("start it: %w", err)
	}
	if st.Exit != nil && st.Exit.Error != "" {
		return fmt.Errorf("%w: cmd %q cannot start in the sandbox: %s", sbx.ErrInvalid, sb.Options.Cmd[0], st.Exit.Error)
	}
	sb.Cmd = &sbx.CmdStart{Status: st.State}
	if d.Spec.ReadyCheck == nil {
		return nil
	}
	ended := func(ctx context.Context) (bool, error) {
		st, err := c.MainCmd(ctx)
		if err != nil {
			return false, err
		}
		return st.State == execapi.MainCmdExited, nil
	}
	if check := d.Spec.ReadyCheck; len(check.Command) > 0 {
		var kv []string
		for k, v := range env {
			kv = append(kv, k+"="+v)
		}
		return waitMemberReadyCmd(ctx, c, check, execapi.ExecRequest{Argv: check.Command, Env: kv, Cwd: sb.Options.Workdir, User: sb.Options.User}, ended)
	}
	return h.waitMemberReady(ctx, sb, d.Spec.ReadyCheck, ended)
}

// waitMemberReadyCmd runs the check's command in the member until it
// exits 0, ended says the main command ended, or the timeout passes.
func waitMemberReadyCmd(ctx context.Context, c *client.Client, check *sbx.ReadyCheck, req execapi.ExecRequest, ended func(context.Context) (bool, error)) error {
	timeout := time.Duration(check.Timeout)
	if timeout <= 0 {
		timeout = defaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req.MaxOutputBytes = 4 << 10
	delay := 50 * time.Millisecond
	last := "not run yet"
	for {
		res, err := c.Exec(ctx, req)
		switch {
		case err == nil && res.ExitCode == 0:
			return nil
		case err == nil:
			last = fmt.Sprintf("exit code %d", res.ExitCode)
			if out := strings.TrimSpace(res.Stderr); out != "" {
				last += ": " + out
			}
		case ctx.Err() == nil:
			last = err.Error()
		}
		if gone, err := ended(ctx); err == nil && gone {
			return fmt.Errorf("the main command ended before its ready command passed (%s)", last)
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("the ready command %q did not pass within %s (%s)", strings.Join(check.Command, " "), timeout, last)
			}
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// waitMemberReady runs check against sb until it passes, fails for good,
// ended says the command ended, or the check's timeout passes.
func (h *Host) waitMemberReady(ctx context.Context, sb *sbx.Sandbox, check *sbx.ReadyCheck, ended func(context.Context) (bool, error)) error {
	timeout := time.Duration(check.Timeout)
	if timeout <= 0 {
		timeout = defaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return h.dialSandboxPort(ctx, sb, check.Port)
			},
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 64 << 10,
		},
	}
	defer hc.CloseIdleConnections()
	delay := 50 * time.Millisecond
	last := "no answer yet"
	for {
		done, err := readyOnce(ctx, hc, check)
		if done || err != nil {
			return err
		}
		if gone, err := ended(ctx); err == nil && gone {
			return fmt.Errorf("the main command ended before its ready check passed")
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("the ready check GET %s on port %d did not pass within %s (%s)", check.Path, check.Port, timeout, last)
			}
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// readyOnce runs check once: passed, a refusal (a 4xx), or neither.
func readyOnce(ctx context.Context, hc *http.Client, check *sbx.ReadyCheck) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox"+check.Path, nil)
	if err != nil {
		return false, fmt.Errorf("%w: ready check path %q: %v", sbx.ErrInvalid, check.Path, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	// The sandbox's answer is hostile: a bounded read.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode/100 == 2:
		return check.Body == "" || strings.Contains(string(body), check.Body), nil
	case resp.StatusCode/100 == 4:
		return false, fmt.Errorf("the ready check GET %s on port %d was refused: HTTP %d", check.Path, check.Port, resp.StatusCode)
	}
	return false, nil
}

// poolStats count, per pool, what this process's claims and fills did:
// the hits, misses and boot times that PoolStats reports.
type poolStats struct {
	mu    sync.Mutex
	pools map[string]*sbx.PoolStats
	keys  map[string]string // pool key -> pool name, as seen by fills and claims
}

func (p *poolStats) get(pool string) *sbx.PoolStats {
	if p.pools == nil {
		p.pools = map[string]*sbx.PoolStats{}
		p.keys = map[string]string{}
	}
	s := p.pools[pool]
	if s == nil {
		s = &sbx.PoolStats{}
		p.pools[pool] = s
	}
	return s
}

func (p *poolStats) booted(pool string, took time.Duration, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.get(pool)
	if err != nil {
		s.BootFailures++
		s.LastError = err.Error()
		return
	}
	s.Boots++
	s.BootSeconds += took.Seconds()
	s.LastBootS = took.Seconds()
	s.LastError = ""
}

func (p *poolStats) hit(pool, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.get(pool).Hits++
	p.keys[key] = pool
}

// miss counts a miss for the pool of the first known key.
func (p *poolStats) miss(keys ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		if pool, ok := p.keys[k]; ok {
			p.get(pool).Misses++
			return
		}
	}
}

func (p *poolStats) indexed(pool, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.get(pool)
	p.keys[key] = pool
}

func (p *poolStats) hookFailed(pool string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.get(pool).HookFailures++
}

// PoolStats returns what this process saw of each pool, by name.
func (h *Host) PoolStats() map[string]sbx.PoolStats {
	h.pools.mu.Lock()
	defer h.pools.mu.Unlock()
	out := map[string]sbx.PoolStats{}
	for name, s := range h.pools.pools {
		out[name] = *s
	}
	return out
}

// bootedAlive reports whether idle member m's main command, if it boots
// one, still runs (a fill replaces a member whose server died). An
// executor that does not answer in time counts as alive: the claim's hook
// finds out.
func (h *Host) bootedAlive(ctx context.Context, m *sbx.Sandbox) bool {
	if len(m.Options.Cmd) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, _ := h.executor(m)
	defer c.Close()
	st, err := c.MainCmd(ctx)
	return err != nil || st.State != execapi.MainCmdExited
}

// giveWorkdir gives the working directory to the main command's user when
// the sandbox's start made it (empty, root's): the command finds it as a
// start of the command in a missing directory would have made it (a
// server writes its state under its working directory).
func giveWorkdir(ctx context.Context, c *client.Client, wd, user string) error {
	if wd == "" || user == "" || user == "0" || user == "root" || strings.HasPrefix(user, "0:") {
		return nil
	}
	script := `[ -d "$1" ] && [ -z "$(ls -A "$1")" ] && [ "$(stat -c %u "$1")" = 0 ] && chown "$2" "$1"; true`
	res, err := c.Exec(ctx, sbx.ExecRequest{Argv: []string{"/bin/sh", "-c", script, "sh", wd, user}, User: "0"})
	if err != nil {
		return fmt.Errorf("give the working directory %s to %s: %w", wd, user, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("give the working directory %s to %s: exit %d: %.200s", wd, user, res.ExitCode, res.Stderr)
	}
	return nil
}
