package sandbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sbxrun/sbx"
)

// eventRing is how many events the bus keeps for consumers that resume.
const eventRing = 4096

// ErrEventsLagged ends Events for a consumer too slow to keep up: resume
// from the last event it received.
var ErrEventsLagged = errors.New("event consumer fell behind; resume from the last event received")

// events turns the host's changes into sbx.Events: its own operations
// report at once, and the supervisor's watcher (StartBackground, or the
// first Events call) finds what other processes and the kernel changed (a
// CLI's create, a PID 1 that died, an OOM kill).
type events struct {
	bus     *eventBus
	tracker *tracker
}

func newEvents() *events {
	bus := newEventBus(eventRing)
	return &events{bus: bus, tracker: newTracker(bus)}
}

// Internal change kinds the lifecycle reports (emit).
const (
	changeCreated = "created" // recorded; its resources are being made
	changeReady   = "ready"   // the executor answers
	changePaused  = "paused"
	changeResumed = "resumed"
	changeStopped = "stopped" // PID 1 exited or was stopped
	changeCmdEnd  = "cmd_end" // the main command ended for good (CmdExit)
	changeStarted = "started" // a stopped sandbox runs again
	changeExpired = "expired" // its TTL passed; removal follows
	changeRemoved = "removed"
)

// emit reports a change of sb made by this host.
func (h *Host) emit(change string, sb *sbx.Sandbox) {
	if sb.Pool != "" {
		return // an idle pool member is no one's sandbox yet
	}
	t := h.events.tracker
	status := map[string]sbx.Status{
		changeCreated: sbx.StatusCreating, changeReady: sbx.StatusRunning, changePaused: sbx.StatusPaused,
		changeResumed: sbx.StatusRunning, changeStopped: sbx.StatusStopped, changeStarted: sbx.StatusRunning,
		changeCmdEnd: sb.Status,
	}
	switch st, ok := status[change]; {
	case ok:
		t.observe(&sbx.Sandbox{ID: sb.ID, Name: sb.Name, Status: st, ExitCode: sb.ExitCode, CmdExit: sb.CmdExit})
	case change == changeRemoved:
		t.goneNamed(sb.ID, sb.Name)
	}
}

// Events calls fn with every event after sequence number since (0: only
// new ones), in order, until ctx ends, fn fails, the host closes, or fn
// falls too far behind (ErrEventsLagged). A since this host does not know
// (it restarted, or the events left its buffer) replays the buffer behind
// an sbx.EventReset. The first call starts the watcher if StartBackground
// did not.
func (h *Host) Events(ctx context.Context, since uint64, fn func(sbx.Event) error) error {
	h.supervisor.start(ctx, false)
	resume := since > 0
	if !resume {
		since = h.events.bus.last()
	}
	replay, sub := h.events.bus.subscribe(since, resume)
	defer h.events.bus.unsubscribe(sub)
	for _, e := range replay {
		if err := fn(e); err != nil {
			return err
		}
	}
	for {
		select {
		case e, ok := <-sub.ch:
			if !ok {
				return ErrEventsLagged
			}
			if err := fn(e); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-h.supervisor.done:
			return nil
		}
	}
}

// LastEventSeq returns the sequence number of the host's latest event
// (0 before the first). A stream that resumes after it with Events misses
// nothing published from now on: a server resolves "from now" with it before
// it answers, so that a client that acts once the stream is open sees the
// events of what it did.
func (h *Host) LastEventSeq() uint64 {
	return h.events.bus.last()
}

// StatusCounts returns how many sandboxes the watcher knows in each
// status, and the OOM kills it has seen since it started.
func (h *Host) StatusCounts() (map[sbx.Status]int, uint64) {
	return h.events.tracker.counts()
}

// eventBus numbers events and hands them to subscribers in order. It keeps
// the last events so a consumer that resumes misses nothing still in the
// buffer. Numbers start after a boot epoch (unix microseconds when the bus
// was made), so a restarted host's ids are larger than its predecessor's
// as long as it published fewer than a million events per second of its
// life.
type eventBus struct {
	mu    sync.Mutex
	epoch uint64
	seq   uint64
	ring  []sbx.Event
	size  int
	subs  map[*subscriber]struct{}
}

// subscriber receives events on ch. A subscriber too slow to keep up is
// cut off (ch closed) rather than skipped, so a stream never has a silent
// gap: the consumer resumes from its last event.
type subscriber struct {
	ch chan sbx.Event
}

func newEventBus(size int) *eventBus {
	return newEventBusAt(size, uint64(time.Now().UnixMicro()))
}

// newEventBusAt makes a bus whose first event has id epoch+1.
func newEventBusAt(size int, epoch uint64) *eventBus {
	return &eventBus{size: size, epoch: epoch, seq: epoch, subs: map[*subscriber]struct{}{}}
}

// Publish adds an event (images pulled or removed through a front-end).
func (h *Host) publish(e sbx.Event) { h.events.bus.publish(e) }

func (b *eventBus) publish(e sbx.Event) {
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
// to every later one. When resume is set (the consumer named since) and
// since is not an id this bus can continue from (newer than the newest,
// or older than the buffer, as after a restart), the replay is the whole
// buffer behind an EventReset.
func (b *eventBus) subscribe(since uint64, resume bool) ([]sbx.Event, *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := b.seq + 1 // id of the oldest buffered event
	if len(b.ring) > 0 {
		first = b.ring[0].Seq
	}
	var replay []sbx.Event
	if resume && (since > b.seq || since+1 < first) {
		replay = append(replay, sbx.Event{Seq: first - 1, Type: sbx.EventReset, Time: time.Now().UTC()})
		since = first - 1
	}
	for _, e := range b.ring {
		if e.Seq > since {
			replay = append(replay, e)
		}
	}
	sub := &subscriber{ch: make(chan sbx.Event, 4096)}
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

// tracker turns the sandboxes' observed states into events, whether the
// change came through this host, another process (the CLI) or the kernel
// (PID 1 died, an OOM kill).
type tracker struct {
	mu      sync.Mutex
	known   map[string]*tracked
	removed map[string]time.Time
	// seeded is set by seed; before it, removals are of sandboxes not yet
	// known and are published as they come.
	seeded   bool
	bus      *eventBus
	oomTotal uint64
}

type tracked struct {
	status sbx.Status
	name   string
	oom    uint64
	at     time.Time // last observation, to ignore older snapshots
	// cmdEnded: the end of the main command was reported (EventDied).
	cmdEnded bool
}

func newTracker(bus *eventBus) *tracker {
	return &tracker{known: map[string]*tracked{}, removed: map[string]time.Time{}, bus: bus}
}

// seed records the sandboxes found at start without emitting events.
func (t *tracker) seed(list []*sbx.Sandbox) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.seeded = true
	for _, sb := range list {
		if _, ok := t.known[sb.ID]; !ok {
			t.known[sb.ID] = &tracked{status: sb.Status, name: sb.Name, at: now, oom: ^uint64(0), cmdEnded: sb.CmdExit != nil}
		}
	}
}

// observe records sb's state, emitting the events of the transition.
func (t *tracker) observe(sb *sbx.Sandbox) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observeLocked(sb, time.Now())
}

func (t *tracker) observeLocked(sb *sbx.Sandbox, at time.Time) {
	ev := func(typ string) {
		e := sbx.Event{Type: typ, Sandbox: sb.ID, Name: sb.Name, Status: sb.Status}
		switch typ {
		case sbx.EventExited:
			e.ExitCode = sb.ExitCode
		case sbx.EventDied:
			code := sb.CmdExit.ExitCode
			e.ExitCode = &code
		}
		t.bus.publish(e)
	}
	cur, ok := t.known[sb.ID]
	if !ok {
		delete(t.removed, sb.ID)
		cur = &tracked{name: sb.Name}
		t.known[sb.ID] = cur
		ev(sbx.EventCreated)
	}
	cur.at = at
	// The main command's end comes before PID 1's (Stop ends the command
	// first).
	switch ended := sb.CmdExit != nil; {
	case ended && !cur.cmdEnded:
		ev(sbx.EventDied)
		cur.cmdEnded = true
	case !ended && sb.Status == sbx.StatusRunning:
		cur.cmdEnded = false // started again
	}
	from, to := cur.status, sb.Status
	if from == to {
		return
	}
	cur.status = to
	switch {
	case to == sbx.StatusRunning && (from == "" || from == sbx.StatusCreating):
		ev(sbx.EventReady)
	case to == sbx.StatusRunning && from == sbx.StatusPaused:
		ev(sbx.EventResumed)
	case to == sbx.StatusRunning && from == sbx.StatusStopped:
		ev(sbx.EventStarted)
	case to == sbx.StatusPaused:
		ev(sbx.EventPaused)
	case to == sbx.StatusStopped:
		ev(sbx.EventExited)
	}
}

// goneNamed records that the sandbox id no longer exists; before seed it
// is published even for a sandbox not yet known.
func (t *tracker) goneNamed(id, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.known[id]; !ok && !t.seeded {
		if _, dup := t.removed[id]; !dup {
			t.removed[id] = time.Now()
			t.bus.publish(sbx.Event{Type: sbx.EventRemoved, Sandbox: id, Name: name})
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
	t.bus.publish(sbx.Event{Type: sbx.EventRemoved, Sandbox: id, Name: cur.name})
}

// sync reconciles with a listing taken at listedAt: sandboxes that changed
// and are not newer here, new ones, and ones that disappeared.
func (t *tracker) sync(list []*sbx.Sandbox, listedAt time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := make(map[string]bool, len(list))
	for _, sb := range list {
		seen[sb.ID] = true
		if cur, ok := t.known[sb.ID]; ok && cur.at.After(listedAt) {
			continue // this host saw a newer state
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
func (t *tracker) oomKills(sb *sbx.Sandbox, n uint64) {
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
		t.oomTotal += n - cur.oom
		t.bus.publish(sbx.Event{Type: sbx.EventOOM, Sandbox: sb.ID, Name: sb.Name, Status: cur.status, OOMKills: n})
		cur.oom = n
	}
}

// counts returns how many known sandboxes are in each state, and the OOM
// kills seen.
func (t *tracker) counts() (map[sbx.Status]int, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[sbx.Status]int{}
	for _, cur := range t.known {
		out[cur.status]++
	}
	return out, t.oomTotal
}

// renamed records a sandbox's new name and publishes EventRenamed.
func (t *tracker) renamed(sb *sbx.Sandbox) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.known[sb.ID]; ok {
		cur.name = sb.Name
	}
	t.bus.publish(sbx.Event{Type: sbx.EventRenamed, Sandbox: sb.ID, Name: sb.Name, Status: sb.Status})
}
