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
