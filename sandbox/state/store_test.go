package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type rec struct {
	ID     string
	Labels map[string]string
	N      int
}

func newStore(t testing.TB) *Store {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "root"), filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCreateWriteReadRemove(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Read(id, &rec{}); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("read before first write: got %v, want ErrNoRecord", err)
	}
	if err := l.Write(rec{ID: id, N: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(id); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: got %v, want ErrExists", err)
	}
	if _, err := s.TryLock(id); !errors.Is(err, ErrLocked) {
		t.Fatalf("trylock while held: got %v, want ErrLocked", err)
	}
	var r rec
	if err := s.Read(id, &r); err != nil || r.N != 1 {
		t.Fatalf("read: %v %+v", err, r)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(id, &r); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read after remove: got %v, want ErrNotFound", err)
	}
	if _, err := s.Lock(context.Background(), id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lock after remove: got %v, want ErrNotFound", err)
	}
	if ids, _ := s.IDs(); len(ids) != 0 {
		t.Fatalf("ids after remove: %v", ids)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"", "../etc", "ABCDEF", NewID() + "0", "zz" + NewID()[2:]} {
		if _, err := s.Create(id); err == nil {
			t.Errorf("Create(%q) succeeded", id)
		}
		if err := s.Read(id, &rec{}); err == nil {
			t.Errorf("Read(%q) succeeded", id)
		}
	}
	for _, name := range []string{"", ".hidden", "a/b", "..", "-x", string(make([]byte, 200))} {
		if err := s.ClaimName(name, NewID()); err == nil {
			t.Errorf("ClaimName(%q) succeeded", name)
		}
	}
	ids, _ := s.IDs()
	names, _ := s.Names()
	if len(ids) != 0 || len(names) != 0 {
		t.Fatalf("bad input left state behind: %v %v", ids, names)
	}
}

// A waiter blocked on the lock of a sandbox that its holder removes must
// learn that the sandbox is gone, not get a lock on a dead file.
func TestLockWaiterSeesRemoval(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(rec{ID: id}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := s.Lock(context.Background(), id)
		if err == nil {
			w.Unlock()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter block in flock
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrNotFound) {
		t.Fatalf("waiter: got %v, want ErrNotFound", err)
	}
}

func TestLockHonoursContext(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
	l.Unlock()
	// The abandoned waiter must not keep the lock once it gets it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := s.TryLock(id)
		if err == nil {
			m.Unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock still held by the abandoned waiter: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNames(t *testing.T) {
	s := newStore(t)
	a, b := NewID(), NewID()
	la, _ := s.Create(a)
	defer la.Unlock()
	if err := s.ClaimName("web", a); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimName("web", a); err != nil {
		t.Fatalf("re-claim by owner: %v", err)
	}
	if err := s.ClaimName("web", b); !errors.Is(err, ErrNameInUse) {
		t.Fatalf("claim by other: got %v, want ErrNameInUse", err)
	}
	if id, err := s.LookupName("web"); err != nil || id != a {
		t.Fatalf("lookup: %s %v", id, err)
	}
	s.ReleaseName("web", b) // not the owner: no effect
	if id, _ := s.LookupName("web"); id != a {
		t.Fatal("non-owner released the name")
	}
	// A name whose owner directory is gone is stale and can be taken.
	if err := la.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimName("web", b); err != nil {
		t.Fatalf("claim of stale name: %v", err)
	}
	if _, err := s.LookupName("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lookup missing: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	ids := []string{NewID(), NewID(), NewID()}
	for i, id := range ids {
		if err := s.SetExpiry(id, now.Add(time.Duration([]int{-1, 1, 2}[i])*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Expired(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("expired at now: %v, want [%s]", got, ids[0])
	}
	// Moving a deadline replaces it.
	if err := s.SetExpiry(ids[0], now.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Expired(now.Add(150 * time.Minute))
	if len(got) != 2 || got[0] != ids[1] || got[1] != ids[2] {
		t.Fatalf("expired later: %v", got)
	}
	s.ClearExpiry(ids[1])
	got, _ = s.Expired(now.Add(4 * time.Hour))
	if len(got) != 2 {
		t.Fatalf("after clear: %v", got)
	}
}

// Listing stays correct with thousands of sandboxes, including ones whose
// creator died before writing a record.
func TestReadAllThousands(t *testing.T) {
	s := newStore(t)
	n := 2000
	if testing.Short() {
		n = 300 // each create syncs to disk: seconds under load
	}
	want := map[string]int{}
	for i := range n {
		id := NewID()
		l, err := s.Create(id)
		if err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			l.Unlock() // no record: an interrupted create
			continue
		}
		if err := l.Write(rec{ID: id, N: i, Labels: map[string]string{"i": strconv.Itoa(i % 7)}}); err != nil {
			t.Fatal(err)
		}
		l.Unlock()
		want[id] = i
	}
	entries, err := ReadAll[rec](s)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != n {
		t.Fatalf("got %d entries, want %d", len(entries), n)
	}
	noRecord := 0
	for _, e := range entries {
		if e.Err != nil {
			if !errors.Is(e.Err, ErrNoRecord) {
				t.Fatalf("%s: %v", e.ID, e.Err)
			}
			noRecord++
			continue
		}
		if e.Record.ID != e.ID || e.Record.N != want[e.ID] {
			t.Fatalf("entry %s has record %+v", e.ID, e.Record)
		}
	}
	if noRecord != n/100 {
		t.Fatalf("%d entries without record, want %d", noRecord, n/100)
	}
}

func BenchmarkReadAll5000(b *testing.B) {
	s := newStore(b)
	for range 5000 {
		id := NewID()
		l, _ := s.Create(id)
		_ = l.Write(rec{ID: id, Labels: map[string]string{"team": "a"}})
		l.Unlock()
	}
	b.ResetTimer()
	for range b.N {
		if _, err := ReadAll[rec](s); err != nil {
			b.Fatal(err)
		}
	}
}

// Several processes increment a counter in one record under the lock; no
// increment may be lost.
func TestLockAcrossProcesses(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(rec{ID: id}); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	const procs, rounds = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperIncrement$")
			cmd.Env = append(os.Environ(), "STATE_HELPER=1",
				"STATE_ROOT="+s.Root(), "STATE_RUN="+s.RunRoot(), "STATE_ID="+id, "STATE_ROUNDS="+strconv.Itoa(rounds))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("helper: %v\n%s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var r rec
	if err := s.Read(id, &r); err != nil {
		t.Fatal(err)
	}
	if r.N != procs*rounds {
		t.Fatalf("counter = %d, want %d: the lock let writers overlap", r.N, procs*rounds)
	}
}

func TestHelperIncrement(t *testing.T) {
	if os.Getenv("STATE_HELPER") != "1" {
		t.Skip("helper process for TestLockAcrossProcesses")
	}
	s, err := Open(os.Getenv("STATE_ROOT"), os.Getenv("STATE_RUN"))
	if err != nil {
		t.Fatal(err)
	}
	id := os.Getenv("STATE_ID")
	rounds, _ := strconv.Atoi(os.Getenv("STATE_ROUNDS"))
	for range rounds {
		l, err := s.Lock(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var r rec
		if err := l.Read(&r); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond) // widen the race window
		r.N++
		if err := l.Write(r); err != nil {
			t.Fatal(err)
		}
		l.Unlock()
	}
}

// A process killed while holding a lock releases it: the kernel drops the
// flock with the last descriptor.
func TestLockReleasedWhenHolderDies(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "STATE_HELPER=1", "STATE_ROOT="+s.Root(), "STATE_RUN="+s.RunRoot(), "STATE_ID="+id)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "locked" {
		t.Fatalf("helper did not lock: %q %v", buf, err)
	}
	if _, err := s.TryLock(id); !errors.Is(err, ErrLocked) {
		t.Fatalf("trylock while the helper holds it: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	m, err := s.TryLock(id)
	if err != nil {
		t.Fatalf("lock of a dead holder: %v", err)
	}
	m.Unlock()
}

func TestHelperHoldLock(t *testing.T) {
	if os.Getenv("STATE_HELPER") != "1" {
		t.Skip("helper process for TestLockReleasedWhenHolderDies")
	}
	s, err := Open(os.Getenv("STATE_ROOT"), os.Getenv("STATE_RUN"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(context.Background(), os.Getenv("STATE_ID")); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked")
	time.Sleep(time.Minute)
}

// TestRewriteIsAtomic: while one goroutine rewrites a record (the swap of
// writeAtomic), readers always decode a whole record, and no temporary
// file is left.
func TestRewriteIsAtomic(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	big := map[string]string{"pad": string(make([]byte, 64<<10))}
	if err := l.Write(rec{ID: id, Labels: big}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			var r rec
			if err := s.Read(id, &r); err != nil || r.ID != id {
				t.Errorf("read during rewrites: %v (id %q)", err, r.ID)
				return
			}
		}
	}()
	for i := range 300 {
		if err := l.Write(rec{ID: id, Labels: big, N: i}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	var r rec
	if err := s.Read(id, &r); err != nil || r.N != 299 {
		t.Fatalf("last record: %v, N=%d", err, r.N)
	}
	entries, _ := os.ReadDir(s.Dir(id))
	for _, e := range entries {
		if e.Name() != recordFile && e.Name() != lockFile {
			t.Errorf("left in the sandbox directory: %s", e.Name())
		}
	}
}

// gcPass does what sbx gc does with the store: every sandbox whose lock is
// free and that has no record is taken for the debris of a dead creator
// and removed. It returns how many it removed.
func gcPass(s *Store) int {
	ids, _ := s.IDs()
	n := 0
	for _, id := range ids {
		l, err := s.TryLock(id)
		if err != nil {
			continue
		}
		var v map[string]any
		if err := l.Read(&v); errors.Is(err, ErrNoRecord) {
			if l.Remove() == nil {
				n++
			}
			continue
		}
		l.Unlock()
	}
	n += len(mustAbandoned(s))
	return n
}

func mustAbandoned(s *Store) []string {
	removed, _ := s.RemoveAbandoned()
	return removed
}

// GC running beside creates and removes never takes over what a live
// process holds: creates never fail to lock their new sandbox, removes
// never find their directory refilled, and GC removes nothing.
func TestGCNeverTouchesLiveCreatesAndRemoves(t *testing.T) {
	s := newStore(t)
	stop := make(chan struct{})
	var taken atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				taken.Add(int64(gcPass(s)))
			}
		}
	}()
	var errs atomic.Int64
	var first atomic.Value
	var workers sync.WaitGroup
	for w := 0; w < 4; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := 0; i < 300; i++ {
				id := NewID()
				l, err := s.Create(id)
				if err == nil {
					err = l.Write(map[string]string{"status": "running"})
				}
				if err == nil {
					err = l.Remove()
				}
				if err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	if errs.Load() > 0 || taken.Load() > 0 {
		t.Fatalf("%d creates/removes failed (first: %v); gc took over %d live sandboxes", errs.Load(), first.Load(), taken.Load())
	}
	if ids, _ := s.IDs(); len(ids) > 0 {
		t.Fatalf("left: %v", ids)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Root(), "sandboxes")); len(ents) > 0 {
		t.Fatalf("left in the sandboxes directory: %d entries", len(ents))
	}
}
