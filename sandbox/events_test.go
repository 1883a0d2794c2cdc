package sandbox

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sbxrun/sbx"
)

func TestEventBusOrdersConcurrentPublishers(t *testing.T) {
	bus := newEventBusAt(8192, 0)
	const publishers, each = 8, 200
	_, a := bus.subscribe(0, false)
	_, b := bus.subscribe(0, false)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				bus.publish(sbx.Event{Type: "test", Sandbox: string(rune('a' + p)), OOMKills: uint64(i)})
			}
		}()
	}
	wg.Wait()
	var streams [2][]sbx.Event
	for i, sub := range []*subscriber{a, b} {
		for len(sub.ch) > 0 {
			streams[i] = append(streams[i], <-sub.ch)
		}
	}
	for si, evs := range streams {
		if len(evs) != publishers*each {
			t.Fatalf("subscriber %d: %d events", si, len(evs))
		}
		next := map[string]uint64{}
		for i, e := range evs {
			if i > 0 && e.Seq != evs[i-1].Seq+1 {
				t.Fatalf("subscriber %d: seq %d after %d", si, e.Seq, evs[i-1].Seq)
			}
			if e.OOMKills != next[e.Sandbox] {
				t.Fatalf("subscriber %d: publisher %s event %d arrived when %d was due", si, e.Sandbox, e.OOMKills, next[e.Sandbox])
			}
			next[e.Sandbox]++
		}
	}
	for i := range streams[0] {
		if streams[0][i] != streams[1][i] {
			t.Fatalf("the two subscribers differ at %d", i)
		}
	}
	// A consumer too slow to keep up is cut off, not skipped.
	_, slow := bus.subscribe(bus.last(), false)
	for range cap(slow.ch) + 1 {
		bus.publish(sbx.Event{Type: "flood"})
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != cap(slow.ch) {
		t.Fatalf("slow subscriber got %d events and then %s, want %d and a closed channel", n, "more", cap(slow.ch))
	}
}

func TestTrackerTransitions(t *testing.T) {
	bus := newEventBusAt(64, 0)
	tr := newTracker(bus)
	tr.seed(nil)
	_, sub := bus.subscribe(0, false)
	sb := &sbx.Sandbox{ID: "a", Status: sbx.StatusRunning}
	step := func(st sbx.Status) { c := *sb; c.Status = st; tr.observe(&c) }
	step(sbx.StatusRunning)
	step(sbx.StatusPaused)
	step(sbx.StatusRunning)
	step(sbx.StatusStopped)
	step(sbx.StatusRunning)
	tr.oomKills(sb, 2)
	tr.goneNamed("a", "")
	tr.goneNamed("a", "")
	// A listing taken before the removal does not bring it back.
	tr.sync([]*sbx.Sandbox{sb}, time.Now().Add(-time.Second))
	// One made elsewhere appears; one that vanished is removed.
	tr.sync([]*sbx.Sandbox{{ID: "b", Status: sbx.StatusCreating}}, time.Now())
	tr.sync([]*sbx.Sandbox{{ID: "b", Status: sbx.StatusRunning}}, time.Now())
	tr.sync(nil, time.Now())
	want := []string{sbx.EventCreated, sbx.EventReady, sbx.EventPaused, sbx.EventResumed, sbx.EventExited, sbx.EventStarted,
		sbx.EventOOM, sbx.EventRemoved, sbx.EventCreated, sbx.EventReady, sbx.EventRemoved}
	for i, w := range want {
		select {
		case e := <-sub.ch:
			if e.Type != w || e.Seq != uint64(i+1) {
				t.Fatalf("event %d: %s seq %d, want %s seq %d", i, e.Type, e.Seq, w, i+1)
			}
		default:
			t.Fatalf("event %d (%s) missing", i, w)
		}
	}
	select {
	case e := <-sub.ch:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
	if counts, oom := tr.counts(); oom != 2 || len(counts) != 0 {
		t.Fatalf("counts %v, oom kills %d; want none left and 2", counts, oom)
	}
}

// TestHostChangesBecomeEvents checks the mapping of the lifecycle's own
// changes to events, each reported once even when the watcher sees it too.
func TestHostChangesBecomeEvents(t *testing.T) {
	h := &Host{}
	h.events = newEvents()
	bus := h.events.bus
	_, sub := bus.subscribe(bus.last(), false)
	sb := &sbx.Sandbox{ID: "x", Name: "n"}
	for _, c := range []string{changeCreated, changeReady, changePaused, changeResumed, changeStopped, changeStarted, changeExpired, changeRemoved} {
		h.emit(c, sb)
	}
	h.events.tracker.goneNamed("x", "n") // the watcher's report of the same removal
	want := []string{sbx.EventCreated, sbx.EventReady, sbx.EventPaused, sbx.EventResumed, sbx.EventExited, sbx.EventStarted, sbx.EventRemoved}
	for i, w := range want {
		select {
		case e := <-sub.ch:
			if e.Type != w || e.Sandbox != "x" || e.Name != "n" {
				t.Fatalf("event %d: %+v, want %s", i, e, w)
			}
		default:
			t.Fatalf("event %d (%s) missing", i, w)
		}
	}
	select {
	case e := <-sub.ch:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
}

// TestEventIDsSurviveRestart checks that a restarted host's ids follow its
// predecessor's and that a consumer naming an id the host does not hold
// gets a reset event before the buffered events.
func TestEventIDsSurviveRestart(t *testing.T) {
	old := newEventBus(4)
	for range 3 {
		old.publish(sbx.Event{Type: "old"})
	}
	lastOld := old.last()
	time.Sleep(2 * time.Millisecond)
	bus := newEventBus(4)
	bus.publish(sbx.Event{Type: "new"})
	if bus.last() <= lastOld {
		t.Fatalf("restarted bus numbers from %d, not after the old bus's %d", bus.last(), lastOld)
	}
	types := func(evs []sbx.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}
	check := func(name string, since uint64, want ...string) {
		t.Helper()
		replay, sub := bus.subscribe(since, true)
		bus.unsubscribe(sub)
		if got := types(replay); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s (since %d): %v, want %v", name, since, got, want)
		}
		if len(replay) > 1 && replay[0].Type == sbx.EventReset && replay[0].Seq != replay[1].Seq-1 {
			t.Errorf("%s: reset id %d does not precede the replay's %d", name, replay[0].Seq, replay[1].Seq)
		}
	}
	check("id of the previous host", lastOld, sbx.EventReset, "new")
	check("id from the future", bus.last()+10, sbx.EventReset, "new")
	check("everything buffered (REST since=0)", sbx.EventsBuffered, sbx.EventReset, "new")
	check("newest id", bus.last())
	check("id before the first event", bus.last()-1, "new")
	for range 5 { // the buffer of 4 drops the first two events
		bus.publish(sbx.Event{Type: "more"})
	}
	check("id older than the buffer", bus.last()-5, sbx.EventReset, "more", "more", "more", "more")
	check("oldest buffered", bus.last()-4, "more", "more", "more", "more")
}

// TestRemovalsBeforeSeedArePublished checks that the report of a sandbox
// removed while the watcher starts (a TTL that passed while nothing
// watched) becomes a sandbox.removed event, once.
func TestRemovalsBeforeSeedArePublished(t *testing.T) {
	bus := newEventBusAt(16, 0)
	tr := newTracker(bus)
	_, sub := bus.subscribe(0, false)
	tr.goneNamed("expired", "ttl")
	tr.goneNamed("expired", "ttl")
	tr.seed(nil)
	tr.goneNamed("unknown", "") // after seeding, unknown ids are not reported
	select {
	case e := <-sub.ch:
		if e.Type != sbx.EventRemoved || e.Sandbox != "expired" || e.Name != "ttl" {
			t.Fatalf("event %+v", e)
		}
	default:
		t.Fatal("no sandbox.removed for the sandbox removed at start")
	}
	select {
	case e := <-sub.ch:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
}

// TestTrackerReportsMainCmdEnd: the end of a sandbox's main command is one
// sandbox.died event with its exit code, whether this host or a listing
// saw it, before PID 1's exit; a start runs the command again and its next
// end is reported again.
func TestTrackerReportsMainCmdEnd(t *testing.T) {
	bus := newEventBusAt(64, 0)
	tr := newTracker(bus)
	tr.seed([]*sbx.Sandbox{{ID: "old", Status: sbx.StatusRunning, CmdExit: &sbx.Exit{ExitCode: 1}}})
	_, sub := bus.subscribe(0, false)
	running := &sbx.Sandbox{ID: "a", Status: sbx.StatusRunning}
	ended := &sbx.Sandbox{ID: "a", Status: sbx.StatusRunning, CmdExit: &sbx.Exit{ExitCode: 6}}
	stopped := &sbx.Sandbox{ID: "a", Status: sbx.StatusStopped, CmdExit: &sbx.Exit{ExitCode: 6}}
	tr.observe(running)
	tr.observe(ended)
	tr.sync([]*sbx.Sandbox{ended, {ID: "old", Status: sbx.StatusRunning, CmdExit: &sbx.Exit{ExitCode: 1}}}, time.Now())
	tr.observe(stopped)
	tr.observe(running) // started again
	tr.sync([]*sbx.Sandbox{{ID: "a", Status: sbx.StatusStopped, CmdExit: &sbx.Exit{ExitCode: 143, Signal: "SIGTERM"}}}, time.Now())
	want := []struct {
		typ  string
		code int
	}{{sbx.EventCreated, -1}, {sbx.EventReady, -1}, {sbx.EventDied, 6}, {sbx.EventExited, -1}, {sbx.EventStarted, -1}, {sbx.EventDied, 143}, {sbx.EventExited, -1}, {sbx.EventRemoved, -1}}
	for i, w := range want {
		select {
		case e := <-sub.ch:
			if e.Type != w.typ || (w.code >= 0 && (e.ExitCode == nil || *e.ExitCode != w.code)) {
				t.Fatalf("event %d: %+v, want %s (exit code %d)", i, e, w.typ, w.code)
			}
		default:
			t.Fatalf("event %d (%s) missing", i, w.typ)
		}
	}
	select {
	case e := <-sub.ch:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
}
