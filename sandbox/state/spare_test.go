package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// inode is the inode number of the file at path (0 if none).
func inode(path string) uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

// TestPreparedWritesFillSpares: after PrepareWrites, the next record
// writes and the next name claim take the files made then (the record
// and the name are those very inodes), readers see each whole record, a
// used spare (holding the record it replaced) is never taken again, and
// the first write that finds none to fill makes a new file and removes
// them. A spare a crash left written is never read.
func TestPreparedWritesFillSpares(t *testing.T) {
	s := newStore(t)
	id := NewID()
	l, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := l.Write(rec{ID: id, N: 0}); err != nil {
		t.Fatal(err)
	}
	if err := l.PrepareWrites(); err != nil {
		t.Fatal(err)
	}
	dir := s.Dir(id)
	spares := []string{filepath.Join(dir, spareFile+".0"), filepath.Join(dir, spareFile+".1")}
	for i, sp := range spares {
		want := inode(sp)
		if want == 0 {
			t.Fatalf("no spare %s", sp)
		}
		if err := l.Write(rec{ID: id, N: i + 1}); err != nil {
			t.Fatal(err)
		}
		if got := inode(filepath.Join(dir, recordFile)); got != want {
			t.Errorf("write %d: the record is inode %d, not the spare's %d", i+1, got, want)
		}
		// The spare's path now holds the record it replaced, which no
		// write takes again.
		var old rec
		if data, err := os.ReadFile(sp); err != nil || json.Unmarshal(data, &old) != nil || old.N != i {
			t.Errorf("spare %s after its write: %q, %v; want the record it replaced (N %d)", sp, data, err, i)
		}
		var r rec
		if err := s.Read(id, &r); err != nil || r.N != i+1 {
			t.Fatalf("read after write %d: %+v, %v", i+1, r, err)
		}
	}
	nameSpare := inode(filepath.Join(dir, spareName))
	if err := s.ClaimName("web", id); err != nil || inode(filepath.Join(s.root, namesDir, "web")) != nameSpare {
		t.Fatalf("claim a name with the spare: %v (inode %d, spare's %d)", err, inode(filepath.Join(s.root, namesDir, "web")), nameSpare)
	}
	if owner, err := s.LookupName("web"); err != nil || owner != id {
		t.Fatalf("name web: %q, %v", owner, err)
	}

	if err := l.Write(rec{ID: id, N: 3}); err != nil {
		t.Fatal(err)
	}
	var r rec
	if err := s.Read(id, &r); err != nil || r.N != 3 {
		t.Fatalf("read after a write without spares: %+v, %v", r, err)
	}
	// The write that found no spare to fill removed the used ones.
	for _, sp := range spares {
		if _, err := os.Lstat(sp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("used spare %s after a write that found none to fill: %v; want it removed", sp, err)
		}
	}

	// A name in use is refused with a spare too, and the spare goes.
	other := NewID()
	lo, err := s.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Unlock()
	if err := lo.Write(rec{ID: other}); err != nil {
		t.Fatal(err)
	}
	if err := lo.PrepareWrites(); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimName("web", other); !errors.Is(err, ErrNameInUse) {
		t.Fatalf("claim a taken name: %v", err)
	}
	if owner, _ := s.LookupName("web"); owner != id {
		t.Fatalf("the taken name changed owner to %s", owner)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(other), spareName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the used name spare is left: %v", err)
	}

	// A spare a crash left half written is not taken.
	sp := filepath.Join(s.Dir(other), spareFile+".0")
	if err := os.WriteFile(sp, []byte(`{"ID":"garbage`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := lo.Write(rec{ID: other, N: 7}); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(other, &r); err != nil || r.N != 7 || r.ID != other {
		t.Fatalf("read after a write past a written spare: %+v, %v", r, err)
	}
	if data, err := os.ReadFile(sp); err != nil || string(data) != `{"ID":"garbage` {
		t.Errorf("the written spare after a write past it: %q, %v; want it as the crash left it", data, err)
	}

	// DropSpares removes them all, used or not; later writes make new
	// files.
	if err := lo.PrepareWrites(); err != nil {
		t.Fatal(err)
	}
	s.DropSpares(other)
	for _, name := range []string{spareName, spareFile + ".0", spareFile + ".1"} {
		if _, err := os.Lstat(filepath.Join(s.Dir(other), name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after DropSpares: %v", name, err)
		}
	}
	if err := lo.Write(rec{ID: other, N: 8}); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(other, &r); err != nil || r.N != 8 {
		t.Fatalf("read after a write without spares: %+v, %v", r, err)
	}
}
