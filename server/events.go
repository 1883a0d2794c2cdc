package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/sandbox"
	"github.com/sbxrun/sbx/server/api"
)

// eventBus numbers events and hands them to subscribers in order. It keeps
// the last events so a client that reconnects with Last-Event-ID misses
// nothing still in the buffer. Numbers start after a boot epoch (unix
// microseconds when the bus was made), so a restarted server's ids are
// larger than its predecessor's as long as it published fewer than a
// million events per second of its life.
type eventBus struct {
	mu    sync.Mutex
	epoch uint64
	seq   uint64
	ring  []api.Event
	size  int
	subs  map[*subscriber]struct{}
}

// subscriber receives events on ch. A subscriber too slow to keep up is
// cut off (ch closed) rather than skipped, so a stream never has a silent
// gap: the client reconnects with Last-Event-ID.
type subscriber struct {
	ch chan api.Event
}

func newEventBus(size int) *eventBus {
	return newEventBusAt(size, uint64(time.Now().UnixMicro()))
}

// newEventBusAt makes a bus whose first event has id epoch+1.
func newEventBusAt(size int, epoch uint64) *eventBus {
	return &eventBus{size: size, epoch: epoch, seq: epoch, subs: map[*subscriber]struct{}{}}
}

func (b *eventBus) publish(e api.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if len(b.ring) == b.size {
		copy(b.ring, b.ring[1:])
		b.ring = b.ring[:b.size-1]
	}
	b.ring = append(b.ring, e)
	for sub := range b.subs {
		select {
		case sub.ch <- e:
		default:
			close(sub.ch)
			delete(b.subs, sub)
		}
	}
}

// subscribe returns the buffered events after since and a subscription
// to every later one. When resume is set (the client named since) and
// since is not an id this bus can continue from (newer than the newest,
// or older than the buffer, as after a server restart), the replay is the
// whole buffer behind an EventReset.
func (b *eventBus) subscribe(since uint64, resume bool) ([]api.Event, *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := b.seq + 1 // id of the oldest buffered event
	if len(b.ring) > 0 {
		first = b.ring[0].Seq
	}
	var replay []api.Event
	if resume && (since > b.seq || since+1 < first) {
		replay = append(replay, api.Event{Seq: first - 1, Type: api.EventReset, Time: time.Now().UTC()})
		since = first - 1
	}
	for _, e := range b.ring {
		if e.Seq > since {
			replay = append(replay, e)
		}
	}
	sub := &subscriber{ch: make(chan api.Event, 4096)}
	b.subs[sub] = struct{}{}
	return replay, sub
}

func (b *eventBus) unsubscribe(sub *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[sub]; ok {
		delete(b.subs, sub)
		close(sub.ch)
	}
}

// last is the sequence number of the newest event.
func (b *eventBus) last() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// streamEvents serves GET /v1/events as server-sent events. Each event's
// id is its sequence number; Last-Event-ID (or ?since=N) replays the
// buffered events after N, behind a reset event when N is unknown.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	since, resume := s.events.last(), false
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("since")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.fail(w, badRequest("event id %q: want a sequence number", v))
			return
		}
		since, resume = n, true
	}
	rc := http.NewResponseController(w)
	replay, sub := s.events.subscribe(since, resume)
	defer s.events.unsubscribe(sub)
	w.Header().Set("Content-Type", api.ContentTypeSSE)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": sbx events\n\n")
	send := func(e api.Event) error {
		data, _ := json.Marshal(e)
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data); err != nil {
			return err
		}
		return nil
	}
	for _, e := range replay {
		if send(e) != nil {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case e, ok := <-sub.ch:
			if !ok {
				return // too slow: the client reconnects with Last-Event-ID
			}
			if send(e) != nil {
				return
			}
		drain:
			for {
				select {
				case e, ok := <-sub.ch:
					if !ok {
						_ = rc.Flush()
						return
					}
					if send(e) != nil {
						return
					}
				default:
					break drain
				}
			}
		case <-heartbeat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// tracker turns the sandboxes' observed states into events, whether the
// change came through this server, another process (the CLI) or the
// kernel (PID 1 died, an OOM kill).
type tracker struct {
	mu      sync.Mutex
	known   map[string]*tracked
	removed map[string]time.Time
	// seeded is set by seed; before it, removals the Manager reports (the
	// TTL reaping of Start's first listing) are of sandboxes not yet known
	// and are published as they come.
	seeded bool
	bus    *eventBus
	m      *metrics
}

type tracked struct {
	status sandbox.Status
	name   string
	oom    uint64
	at     time.Time // last observation, to ignore older snapshots
}

func newTracker(bus *eventBus, m *metrics) *tracker {
	return &tracker{known: map[string]*tracked{}, removed: map[string]time.Time{}, bus: bus, m: m}
}

// seed records the sandboxes found at start without emitting events.
func (t *tracker) seed(list []*sandbox.Sandbox) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.seeded = true
	for _, sb := range list {
		t.known[sb.ID] = &tracked{status: sb.Status, name: sb.Name, at: now, oom: ^uint64(0)}
	}
}

// observe records sb's state, emitting the events of the transition.
func (t *tracker) observe(sb *sandbox.Sandbox) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observeLocked(sb, time.Now())
}

func (t *tracker) observeLocked(sb *sandbox.Sandbox, at time.Time) {
	ev := func(typ string) {
		e := api.Event{Type: typ, Sandbox: sb.ID, Name: sb.Name, Status: sbx.Status(sb.Status)}
		if typ == api.EventExited {
			e.ExitCode = sb.ExitCode
		}
		t.bus.publish(e)
	}
	cur, ok := t.known[sb.ID]
	if !ok {
		delete(t.removed, sb.ID)
		cur = &tracked{name: sb.Name}
		t.known[sb.ID] = cur
		ev(api.EventCreated)
	}
	cur.at = at
	from, to := cur.status, sb.Status
	if from == to {
		return
	}
	cur.status = to
	switch {
	case to == sandbox.StatusRunning && (from == "" || from == sandbox.StatusCreating):
		ev(api.EventReady)
	case to == sandbox.StatusRunning && from == sandbox.StatusPaused:
		ev(api.EventResumed)
	case to == sandbox.StatusRunning && from == sandbox.StatusStopped:
		ev(api.EventStarted)
	case to == sandbox.StatusPaused:
		ev(api.EventPaused)
	case to == sandbox.StatusStopped:
		ev(api.EventExited)
	}
}

// gone records that the sandbox id no longer exists.
func (t *tracker) gone(id string) { t.goneNamed(id, "") }

// goneNamed is gone for a removal the Manager reported with the sandbox's
// name: before seed it is published even for a sandbox not yet known.
func (t *tracker) goneNamed(id, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.known[id]; !ok && !t.seeded {
		if _, dup := t.removed[id]; !dup {
			t.removed[id] = time.Now()
			t.bus.publish(api.Event{Type: api.EventRemoved, Sandbox: id, Name: name})
		}
		return
	}
	t.goneLocked(id, time.Now())
}

func (t *tracker) goneLocked(id string, at time.Time) {
	cur, ok := t.known[id]
	if !ok {
		return
	}
	delete(t.known, id)
	t.removed[id] = at
	t.bus.publish(api.Event{Type: api.EventRemoved, Sandbox: id, Name: cur.name})
}

// sync reconciles with a listing taken at listedAt: sandboxes that changed
// and are not newer here, new ones, and ones that disappeared.
func (t *tracker) sync(list []*sandbox.Sandbox, listedAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := make(map[string]bool, len(list))
	for _, sb := range list {
		seen[sb.ID] = true
		if cur, ok := t.known[sb.ID]; ok && cur.at.After(listedAt) {
			continue // this server saw a newer state
		}
		if at, ok := t.removed[sb.ID]; ok && at.After(listedAt) {
			continue // removed after the listing
		}
		t.observeLocked(sb, listedAt)
	}
	for id, cur := range t.known {
		if !seen[id] && !cur.at.After(listedAt) {
			t.goneLocked(id, listedAt)
		}
	}
	for id, at := range t.removed {
		if time.Since(at) > time.Minute {
			delete(t.removed, id)
		}
	}
}

// oomKills records a sandbox's OOM kill count, emitting an event and
// counting the new kills when it grew.
func (t *tracker) oomKills(sb *sandbox.Sandbox, n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.known[sb.ID]
	if !ok {
		return
	}
	if cur.oom == ^uint64(0) { // seeded at start: take the count as the baseline
		cur.oom = n
		return
	}
	if n > cur.oom {
		t.m.oomKills.Add(float64(n - cur.oom))
		t.bus.publish(api.Event{Type: api.EventOOM, Sandbox: sb.ID, Name: sb.Name, Status: sbx.Status(cur.status), OOMKills: n})
		cur.oom = n
	}
}

// counts returns how many known sandboxes are in each state.
func (t *tracker) counts() map[sandbox.Status]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[sandbox.Status]int{}
	for _, cur := range t.known {
		out[cur.status]++
	}
	return out
}

// watch reconciles with the state on disk every WatchInterval: it finds
// changes made elsewhere, PID 1s that died and OOM kills, and removes
// sandboxes whose TTL passed (Manager.List does that first).
func (s *Server) watch() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.WatchInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.reconcile(context.Background())
	}
}

// reapExpired removes sandboxes the moment their TTL passes
// (Manager.WatchExpiry) until Shutdown; the watcher reports the removals.
func (s *Server) reapExpired() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.done; cancel() }()
	for ctx.Err() == nil {
		if err := s.mgr.WatchExpiry(ctx, false); err != nil && ctx.Err() == nil {
			s.log.Warn("ttl reaper", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// reconcile runs one round of watch.
func (s *Server) reconcile(ctx context.Context) {
	listedAt := time.Now()
	list, err := s.mgr.List(ctx, sandbox.Filter{})
	if err != nil {
		s.log.Warn("watch: list sandboxes", "err", err)
		return
	}
	if anyDead(list) {
		// Recover marks the sandboxes whose PID 1 is gone as stopped.
		if _, err := s.mgr.Recover(ctx); err != nil {
			s.log.Warn("watch: recover", "err", err)
		}
		listedAt = time.Now()
		if list, err = s.mgr.List(ctx, sandbox.Filter{}); err != nil {
			s.log.Warn("watch: list sandboxes", "err", err)
			return
		}
	}
	for _, sb := range list {
		if sb.Status != sandbox.StatusRunning && sb.Status != sandbox.StatusPaused {
			continue
		}
		u, err := s.mgr.Stats(ctx, sb.ID)
		if err != nil {
			continue
		}
		s.tracker.oomKills(sb, u.OOMKills)
	}
	s.tracker.sync(list, listedAt)
}

// anyDead reports whether the PID 1 of a sandbox recorded as running or
// paused no longer exists.
func anyDead(list []*sandbox.Sandbox) bool {
	for _, sb := range list {
		if (sb.Status == sandbox.StatusRunning || sb.Status == sandbox.StatusPaused) && sb.Pid > 0 {
			if err := unix.Kill(sb.Pid, 0); errors.Is(err, unix.ESRCH) {
				return true
			}
		}
	}
	return false
}
