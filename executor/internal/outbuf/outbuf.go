// Package outbuf keeps the head and the tail of an output stream within a
// fixed budget, so that a command printing gigabytes costs a bounded amount
// of memory while its first and last lines stay visible.
package outbuf

import (
	"fmt"
	"unicode/utf8"
)

// Buffer holds at most about max bytes: the first half of what was written
// and the last half. It is not safe for concurrent use.
type Buffer struct {
	headMax, tailMax int
	head             []byte
	tail             []byte // the last tailMax bytes live at its end
	total            int64
}

// New returns a buffer that keeps max bytes (at least 2).
func New(max int) *Buffer {
	if max < 2 {
		max = 2
	}
	return &Buffer{headMax: max / 2, tailMax: max - max/2}
}

// Write keeps what fits in the head and the latest bytes in the tail. It
// never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= b.tailMax {
		b.tail = append(b.tail[:0], p[len(p)-b.tailMax:]...)
		return n, nil
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*b.tailMax {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-b.tailMax:]...)
	}
	return n, nil
}

// Total is the number of bytes written since the last Reset.
func (b *Buffer) Total() int64 { return b.total }

// Len is the number of bytes held.
func (b *Buffer) Len() int { return len(b.head) + min(len(b.tail), b.tailMax) }

// Truncated reports whether bytes were dropped.
func (b *Buffer) Truncated() bool { return b.total > int64(b.headMax+b.tailMax) }

// Bytes returns everything written when it fit, or the head, a marker line
// saying how many bytes were dropped, and the tail. Cuts are moved to UTF-8
// character boundaries.
func (b *Buffer) Bytes() []byte {
	tail := b.tail
	if len(tail) > b.tailMax {
		tail = tail[len(tail)-b.tailMax:]
	}
	if !b.Truncated() {
		out := make([]byte, 0, len(b.head)+len(tail))
		return append(append(out, b.head...), tail...)
	}
	head := b.head
	for i := 0; i < utf8.UTFMax && len(head) > 0; i++ {
		r, size := utf8.DecodeLastRune(head)
		if r != utf8.RuneError || size != 1 {
			break
		}
		head = head[:len(head)-1]
	}
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	dropped := b.total - int64(len(head)) - int64(len(tail))
	marker := fmt.Sprintf("\n[... %d bytes truncated ...]\n", dropped)
	out := make([]byte, 0, len(head)+len(marker)+len(tail))
	out = append(out, head...)
	out = append(out, marker...)
	return append(out, tail...)
}

// Reset empties the buffer and releases large allocations.
func (b *Buffer) Reset() {
	b.head, b.tail, b.total = nil, nil, 0
}
