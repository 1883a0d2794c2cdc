package outbuf

import (
	"bytes"
	"strings"
	"testing"
)

func TestBufferKeepsAllWhenItFits(t *testing.T) {
	b := New(10)
	b.Write([]byte("hello"))
	b.Write([]byte("world"))
	if got := string(b.Bytes()); got != "helloworld" || b.Truncated() {
		t.Fatalf("got %q truncated=%v", got, b.Truncated())
	}
}

func TestBufferKeepsHeadAndTail(t *testing.T) {
	b := New(10)
	for i := 0; i < 1000; i++ {
		b.Write([]byte("0123456789"))
	}
	got := string(b.Bytes())
	if !b.Truncated() || !strings.HasPrefix(got, "01234") || !strings.HasSuffix(got, "56789") {
		t.Fatalf("got %q", got)
	}
	if !strings.Contains(got, "[... 9990 bytes truncated ...]") {
		t.Fatalf("marker missing in %q", got)
	}
	if cap(b.tail) > 64 {
		t.Fatalf("tail grew to %d", cap(b.tail))
	}
}

func TestBufferCutsOnRuneBoundaries(t *testing.T) {
	b := New(8)
	b.Write(bytes.Repeat([]byte("é"), 100))
	got := b.Bytes()
	if !bytes.HasPrefix(got, []byte("éé\n")) || !bytes.HasSuffix(got, []byte("\néé")) {
		t.Fatalf("got %q", got)
	}
}

// TestBudgetBoundsManyBuffers: many buffers sharing a budget hold no more
// than it, tell the truncation, and return the memory on Release.
func TestBudgetBoundsManyBuffers(t *testing.T) {
	budget := NewBudget(1 << 20)
	var bufs []*Buffer
	chunk := bytes.Repeat([]byte("z"), 4096)
	for i := 0; i < 64; i++ {
		b := NewShared(8<<20, budget)
		for j := 0; j < 1024; j++ {
			b.Write(chunk)
			if budget.Used() > budget.Limit() {
				t.Fatalf("budget used %d > limit %d", budget.Used(), budget.Limit())
			}
		}
		bufs = append(bufs, b)
	}
	last := bufs[len(bufs)-1]
	if !last.Truncated() || !strings.Contains(string(last.Bytes()), "output memory is used up") {
		t.Fatalf("a starved buffer does not say it was truncated: %v %q", last.Truncated(), last.Bytes())
	}
	if first := bufs[0]; first.Len() == 0 {
		t.Fatal("the first buffer got nothing")
	}
	for _, b := range bufs {
		b.Release()
	}
	if budget.Used() != 0 {
		t.Fatalf("budget still holds %d bytes after Release", budget.Used())
	}
	// Fresh buffers get memory again.
	b := NewShared(1024, budget)
	b.Write([]byte("again"))
	if string(b.Bytes()) != "again" {
		t.Fatalf("after release: %q", b.Bytes())
	}
}
