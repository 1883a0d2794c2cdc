package logring

import (
	"bytes"
	"strings"
	"testing"
)

func collect(chunks []Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		b.Write(c.Data)
	}
	return b.String()
}

func TestReadResumesAndFollowsOffsets(t *testing.T) {
	r := New(1 << 20)
	r.Write("stdout", []byte("hello "))
	r.Write("stderr", []byte("oops\n"))
	chunks, next, lost := r.Read(0, 1<<20)
	if collect(chunks) != "hello oops\n" || next != 11 || lost != 0 {
		t.Fatalf("read all: %q next %d lost %d", collect(chunks), next, lost)
	}
	if chunks[0].Stream != "stdout" || chunks[1].Stream != "stderr" || chunks[1].Offset != 6 {
		t.Fatalf("chunks keep streams and offsets: %+v", chunks)
	}
	// From the middle of a chunk.
	chunks, _, _ = r.Read(3, 1<<20)
	if collect(chunks) != "lo oops\n" || chunks[0].Offset != 3 {
		t.Fatalf("read from 3: %q %+v", collect(chunks), chunks[0])
	}
	// Nothing new: no chunks, next stays, and Changed fires on the next write.
	ch := r.Changed()
	if chunks, next, _ := r.Read(11, 1<<20); len(chunks) != 0 || next != 11 {
		t.Fatalf("read at end: %+v %d", chunks, next)
	}
	select {
	case <-ch:
		t.Fatal("changed before a write")
	default:
	}
	r.Write("stdout", []byte("more"))
	select {
	case <-ch:
	default:
		t.Fatal("changed did not fire on write")
	}
	if chunks, next, _ := r.Read(11, 1<<20); collect(chunks) != "more" || next != 15 {
		t.Fatalf("read new: %q %d", collect(chunks), next)
	}
}

func TestRingStaysBoundedAndReportsLoss(t *testing.T) {
	r := New(8 << 10)
	line := bytes.Repeat([]byte("x"), 99)
	line = append(line, '\n')
	for i := 0; i < 10000; i++ {
		r.Write("stdout", line)
	}
	if r.End() != 1_000_000 {
		t.Fatalf("end %d", r.End())
	}
	if r.held > r.max {
		t.Fatalf("held %d > max %d", r.held, r.max)
	}
	if cap(r.chunks) > 4*len(r.chunks)+16 {
		t.Fatalf("chunk slice grew behind the window: cap %d len %d", cap(r.chunks), len(r.chunks))
	}
	chunks, next, lost := r.Read(0, 1<<20)
	held := collect(chunks)
	if next != 1_000_000 || lost == 0 || int64(len(held))+lost != 1_000_000 {
		t.Fatalf("read from 0 of a wrapped ring: held %d lost %d next %d", len(held), lost, next)
	}
	// The tail offset of the last 250 bytes, clamped to what is held.
	if off := r.TailOffset(250); off != 1_000_000-250 {
		t.Fatalf("tail offset %d", off)
	}
	if off := r.TailOffset(1 << 30); off != r.start {
		t.Fatalf("tail offset past the start: %d, start %d", off, r.start)
	}
	// max bounds one read, but always returns at least a chunk.
	chunks, next, _ = r.Read(r.start, 1)
	if len(chunks) != 1 || next != chunks[0].Offset+int64(len(chunks[0].Data)) {
		t.Fatalf("read with tiny max: %d chunks next %d", len(chunks), next)
	}
}

func TestHugeWriteKeepsItsEnd(t *testing.T) {
	r := New(4 << 10)
	big := append(bytes.Repeat([]byte("a"), 100<<10), []byte("END")...)
	r.Write("stdout", big)
	chunks, next, lost := r.Read(0, 1<<20)
	got := collect(chunks)
	if !strings.HasSuffix(got, "aEND") || len(got) > 4<<10 || next != int64(len(big)) || lost != int64(len(big)-len(got)) {
		t.Fatalf("huge write: kept %d bytes ending %q, next %d lost %d", len(got), got[max(0, len(got)-4):], next, lost)
	}
}
