package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox/state"
	"golang.org/x/sys/unix"
)

// supervisor runs the host's background work from StartBackground (or
// the first Events call) until Close: recovery of the sandboxes a previous
// process left, the watcher that reconciles with the state on disk (PID 1s
// that died, OOM kills, changes by other processes) and reports to the
// event bus, removal at expiry (TTL), checkpoints of idle sandboxes,
// auto-remove, and the refills of the network-namespace pool and the warm
// pools.
type supervisor struct {
	h *Host

	mu          sync.Mutex
	started     bool
	done        chan struct{}
	netnsWanted chan struct{} // a bridged create took a prepared namespace
	// poolRefill: a create claimed a warm pool's member
	poolRefill chan struct{}
	// autoRemoves: this host removes the sandboxes created with
	// AutoRemove once their command ended (StartBackground).
	autoRemoves bool
	removingMu  sync.Mutex
	removing    map[string]bool // sandboxes with a RemoveWhenDone running
	// spareless: the claimed pool members whose spare files the watcher
	// removed (dropClaimSpares), as of its last round.
	spareless map[string]bool
	wg        sync.WaitGroup
}

func newSupervisor(h *Host) *supervisor {
	return &supervisor{h: h, done: make(chan struct{}), netnsWanted: make(chan struct{}, 1), poolRefill: make(chan struct{}, 1)}
}

// StartBackground re-adopts the sandboxes a previous process left running
// (Recover) and starts the host's background work until Close: the
// watcher that reports changes made elsewhere, the expiry watcher, the
// idle check (WatchIdle), the removal of sandboxes created with AutoRemove once their command ended
// (RemoveWhenDone), and the network pool (HostConfig.NetworkPool). A
// server calls it; a CLI need not.
func (h *Host) StartBackground(ctx context.Context) error {
	h.supervisor.start(ctx, true)
	return nil
}

func (s *supervisor) start(ctx context.Context, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	h := s.h
	if full {
		live, err := h.Recover(ctx)
		if err != nil {
			// Recover goes on after errors: what it could not undo stays
			// for gc.
			h.log.Warn("recover sandboxes", "err", err)
		}
		h.log.Info("re-adopted running sandboxes", "count", len(live))
		s.autoRemoves = true
		h.resumeEgress(ctx)
	}
	// Without the full background work (sbx events without a server), the
	// state directory is watched from before the first look, so no change
	// falls between that look and the watch.
	var sw *stateWatch
	if !full {
		var err error
		if sw, err = newStateWatch(h.store.SandboxesDir()); err != nil {
			h.log.Warn("watch the state directory; looking every interval instead", "err", err)
		}
	}
	all := s.listAll(ctx)
	s.h.events.tracker.seed(all)
	if s.autoRemoves {
		s.autoRemove(all)
	}
	s.wg.Add(2)
	go s.watch(sw)
	go s.watchExpiry()
	if full && h.cfg.NetworkPool > 0 {
		s.wg.Add(1)
		go s.keepNetworksPrepared()
	}
	if full {
		s.wg.Add(2)
		go s.keepPools()
		go s.watchIdle()
	}
}

// stop ends the background work and drains the network pool.
func (s *supervisor) stop() {
	s.mu.Lock()
	started := s.started
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
	if !started {
		return
	}
	s.wg.Wait()
	s.discardPreparedNetworks()
}

// stopped is a context that ends when the host closes.
func (s *supervisor) stopped() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (s *supervisor) listAll(ctx context.Context) []*sbx.Sandbox {
	list, err := s.h.list(ctx, sbx.Filter{}, true)
	if err != nil {
		s.h.log.Warn("list sandboxes", "err", err)
		return nil
	}
	return list
}

// watch reconciles with the state on disk every WatchInterval and, given
// a watch of the state directory (a host without the full background
// work: sbx events without a server), also as soon as another process
// changes it. A server publishes its own changes as it makes them and
// keeps to the interval.
func (s *supervisor) watch(sw *stateWatch) {
	defer s.wg.Done()
	tick := time.NewTicker(s.h.cfg.WatchInterval)
	defer tick.Stop()
	var wake <-chan struct{}
	if sw != nil {
		defer sw.close()
		wake = sw.wake
	}
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		case _, ok := <-wake:
			if !ok {
				wake = nil
				continue
			}
			// A create or remove changes several entries in a row:
			// look once they have settled.
			select {
			case <-s.done:
				return
			case <-time.After(stateWatchSettle):
			}
			drain(wake)
		}
		s.reconcile(context.Background())
	}
}

// stateWatchSettle is how long the watcher waits after a change to the
// state directory before it looks, so one look sees a whole create.
const stateWatchSettle = 10 * time.Millisecond

// drain empties a wake-up channel without blocking.
func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// watchExpiry removes sandboxes the moment their TTL passes (WatchExpiry);
// the watcher reports the removals.
func (s *supervisor) watchExpiry() {
	defer s.wg.Done()
	ctx, cancel := s.stopped()
	defer cancel()
	for ctx.Err() == nil {
		if err := s.h.WatchExpiry(ctx, false); err != nil && ctx.Err() == nil {
			s.h.log.Warn("expiry watcher", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// watchIdle checkpoints the sandboxes idle past their idle timeout
// (WatchIdle).
func (s *supervisor) watchIdle() {
	defer s.wg.Done()
	ctx, cancel := s.stopped()
	defer cancel()
	_ = s.h.WatchIdle(ctx, false)
}

// reconcile runs one round of watch: changes made elsewhere, PID 1s that
// died, main commands that ended, and OOM kills.
func (s *supervisor) reconcile(ctx context.Context) {
	h := s.h
	listedAt := time.Now()
	list, err := h.list(ctx, sbx.Filter{}, true)
	if err != nil {
		h.log.Warn("watch: list sandboxes", "err", err)
		return
	}
	if anyDead(list) {
		// Recover marks the sandboxes whose PID 1 is gone as stopped.
		if _, err := h.Recover(ctx); err != nil {
			h.log.Warn("watch: recover", "err", err)
		}
		listedAt = time.Now()
		if list, err = h.list(ctx, sbx.Filter{}, true); err != nil {
			h.log.Warn("watch: list sandboxes", "err", err)
			return
		}
	}
	h.probeCmdEnds(ctx, list)
	s.dropClaimSpares(list)
	for _, sb := range list {
		if sb.Status != sbx.StatusRunning && sb.Status != sbx.StatusPaused {
			continue
		}
		u, err := h.Stats(ctx, sb.ID)
		if err != nil {
			continue
		}
		s.h.events.tracker.oomKills(sb, u.OOMKills)
	}
	s.h.events.tracker.sync(list, listedAt)
	if s.autoRemoves { // set before the watcher started
		s.autoRemove(list)
	}
}

// dropClaimSpares removes, once each, the spare files of list's claimed
// pool members (state.Store.DropSpares): their claims leave them, as
// their removal would cost the claim's path a disk journal update.
func (s *supervisor) dropClaimSpares(list []*sbx.Sandbox) {
	seen := make(map[string]bool, len(s.spareless))
	for _, sb := range list {
		if sb.FromPool == "" || sb.Status == sbx.StatusCreating || sb.Status == sbx.StatusPooled {
			continue
		}
		seen[sb.ID] = true
		if !s.spareless[sb.ID] {
			s.h.store.DropSpares(sb.ID)
		}
	}
	s.spareless = seen
}

// anyDead reports whether the PID 1 of a sandbox recorded as running or
// paused no longer exists.
func anyDead(list []*sbx.Sandbox) bool {
	for _, sb := range list {
		if (sb.Status == sbx.StatusRunning || sb.Status == sbx.StatusPaused) && sb.Pid > 0 {
			if err := unix.Kill(sb.Pid, 0); errors.Is(err, unix.ESRCH) {
				return true
			}
		}
	}
	return false
}

// autoRemove runs RemoveWhenDone for each sandbox of list that asks for
// it and has no watcher of this host yet, until the host closes.
func (s *supervisor) autoRemove(list []*sbx.Sandbox) {
	for _, sb := range list {
		if !autoRemoveCandidate(sb) {
			continue
		}
		s.removingMu.Lock()
		if s.removing == nil {
			s.removing = map[string]bool{}
		}
		busy := s.removing[sb.ID]
		s.removing[sb.ID] = true
		s.removingMu.Unlock()
		if busy {
			continue
		}
		s.wg.Add(1)
		go func(id string) {
			defer s.wg.Done()
			ctx, cancel := s.stopped()
			defer cancel()
			if err := s.h.RemoveWhenDone(ctx, id); err != nil && ctx.Err() == nil {
				s.h.log.Warn("auto-remove", "id", id, "err", err)
			}
			s.removingMu.Lock()
			delete(s.removing, id)
			s.removingMu.Unlock()
		}(sb.ID)
	}
}

// keepNetworksPrepared keeps HostConfig.NetworkPool prepared bridged
// namespaces waiting: it prepares them at start and after every bridged
// create takes one, in the background, until Close.
func (s *supervisor) keepNetworksPrepared() {
	defer s.wg.Done()
	ctx, cancel := s.stopped()
	defer cancel()
	for {
		s.prepareNetworks(ctx)
		select {
		case <-s.done:
			return
		case <-s.netnsWanted:
		}
	}
}

func (s *supervisor) prepareNetworks(ctx context.Context) {
	t0 := time.Now()
	added, _, err := s.h.PrepareNetworks(ctx, s.h.cfg.NetworkPool)
	if err != nil && ctx.Err() == nil {
		s.h.log.Warn("network pool: prefill", "added", added, "err", err)
		return
	}
	s.h.log.Debug("network pool prepared", "added", added, "seconds", time.Since(t0).Seconds())
}

// askPrepareNetworks wakes keepNetworksPrepared after a bridged create took a namespace.
func (s *supervisor) askPrepareNetworks() {
	if s.h.cfg.NetworkPool <= 0 {
		return
	}
	select {
	case s.netnsWanted <- struct{}{}:
	default: // a round is already due
	}
}

// discardPreparedNetworks removes the prepared namespaces at Close.
func (s *supervisor) discardPreparedNetworks() {
	if s.h.cfg.NetworkPool <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.h.DiscardPreparedNetworks(ctx); err != nil {
		s.h.log.Warn("network pool: drain (run sbx gc)", "err", err)
	}
}

// keepPools keeps every warm pool filled: at start, after each claim,
// and every poolRefillInterval (for claims by other processes), until
// Close. Fills run one at a time; a pool another process is filling is
// skipped until the next pass.
func (s *supervisor) keepPools() {
	defer s.wg.Done()
	ctx, cancel := s.stopped()
	defer cancel()
	tick := time.NewTicker(poolRefillInterval)
	defer tick.Stop()
	failing := map[string]*poolBackoff{}
	for {
		s.h.refillPools(ctx, failing)
		select {
		case <-s.done:
			return
		case <-s.poolRefill:
		case <-tick.C:
		}
	}
}

// poolRefillInterval is how often a server looks for pools that claims of
// other processes (the CLI) emptied.
const poolRefillInterval = 2 * time.Second

// askPoolRefill wakes keepPools after a claim.
func (s *supervisor) askPoolRefill() {
	select {
	case s.poolRefill <- struct{}{}:
	default: // a refill is already due
	}
}

// poolBackoff delays the refills of a pool whose fills fail (a limit
// reached, an image gone): the wait doubles up to poolMaxBackoff, and one
// warning is logged per failure streak.
type poolBackoff struct {
	wait time.Duration
	next time.Time
}

// refillPools fills every pool whose fill lock is free and that is not
// backing off after failures.
func (h *Host) refillPools(ctx context.Context, failing map[string]*poolBackoff) {
	names, err := h.poolNames()
	if err != nil {
		h.log.Warn("warm pools: list", "err", err)
		return
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		b := failing[name]
		if b != nil && time.Now().Before(b.next) {
			continue
		}
		unlock, err := state.TryLockFile(h.poolLockPath(name))
		if err != nil {
			continue // another process fills it
		}
		rep, err := h.fillLocked(ctx, name)
		unlock()
		switch {
		case err == nil:
			delete(failing, name)
		case ctx.Err() != nil || errors.Is(err, sbx.ErrNotFound):
		case b == nil:
			h.log.Warn("warm pool: refill failed; retrying with backoff", "pool", name, "err", err)
			failing[name] = &poolBackoff{wait: poolRefillInterval, next: time.Now().Add(poolRefillInterval)}
		default:
			b.wait = min(2*b.wait, poolMaxBackoff)
			b.next = time.Now().Add(b.wait)
		}
		if rep != nil && len(rep.Started)+len(rep.Removed) > 0 {
			h.log.Debug("warm pool refilled", "pool", name, "started", len(rep.Started), "removed", len(rep.Removed))
		}
	}
}
