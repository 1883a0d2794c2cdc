// Package outbuf keeps the head and the tail of an output stream within a
// fixed budget, so that a command printing gigabytes costs a bounded amount
// of memory while its first and last lines stay visible. A Budget shared by
// many buffers bounds their total memory as well.
package outbuf

import (
	"fmt"
	"sync/atomic"
	"unicode/utf8"
)

// Budget bounds the memory of all the buffers that share it. It is safe for
// concurrent use; a nil Budget is unlimited.
type Budget struct {
	limit int64
	used  atomic.Int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Used is the number of bytes the buffers hold now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

func (b *Budget) reserve(n int) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		u := b.used.Load()
		if u+int64(n) > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+int64(n)) {
			return true
		}
	}
}

func (b *Budget) release(n int) {
	if b != nil && n > 0 {
		b.used.Add(-int64(n))
	}
}

// Buffer holds at most about max bytes: the first half of what was written
// and the last half. When its Budget runs out it keeps what it holds and
// drops (counts) everything after. It is not safe for concurrent use.
type Buffer struct {
	headMax, tailMax int
	head             []byte
	tail             []byte // the last tailMax bytes live at its end
	total            int64
	lost             int64 // bytes dropped because the budget ran out
	budget           *Budget
	reserved         int // bytes of budget held: cap(head) + cap(tail)
}

// New returns a buffer that keeps max bytes (at least 2).
func New(max int) *Buffer { return NewShared(max, nil) }

// NewShared returns a buffer that keeps max bytes (at least 2) and takes
// its memory from budget (nil: unlimited). Release returns it.
func NewShared(max int, budget *Budget) *Buffer {
	if max < 2 {
		max = 2
	}
	return &Buffer{headMax: max / 2, tailMax: max - max/2, budget: budget}
}

// grow makes room for need bytes in *s (at most limit), taking the memory
// from the budget. It reports false when the budget is exhausted.
func (b *Buffer) grow(s *[]byte, need, limit int) bool {
	if cap(*s) >= need {
		return true
	}
	newCap := min(max(need, 2*cap(*s), 512), limit)
	if !b.budget.reserve(newCap - cap(*s)) {
		newCap = need
		if !b.budget.reserve(newCap - cap(*s)) {
			return false
		}
	}
	b.reserved += newCap - cap(*s)
	grown := make([]byte, len(*s), newCap)
	copy(grown, *s)
	*s = grown
	return true
}

// Write keeps what fits in the head and the latest bytes in the tail. It
// never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	if b.lost > 0 {
		b.lost += int64(n)
		return n, nil
	}
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		if !b.grow(&b.head, len(b.head)+k, b.headMax) {
			b.lost += int64(len(p))
			return n, nil
		}
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= b.tailMax {
		if !b.grow(&b.tail, b.tailMax, 2*b.tailMax) {
			b.lost += int64(len(p))
			return n, nil
		}
		b.tail = append(b.tail[:0], p[len(p)-b.tailMax:]...)
		return n, nil
	}
	if len(b.tail)+len(p) > 2*b.tailMax {
		keep := b.tailMax - len(p)
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-keep:]...)
	}
	if !b.grow(&b.tail, len(b.tail)+len(p), 2*b.tailMax) {
		b.lost += int64(len(p))
		return n, nil
	}
	b.tail = append(b.tail, p...)
	return n, nil
}

// Total is the number of bytes written since the last Reset.
func (b *Buffer) Total() int64 { return b.total }

// Len is the number of bytes held.
func (b *Buffer) Len() int { return len(b.head) + min(len(b.tail), b.tailMax) }

// Truncated reports whether bytes were dropped.
func (b *Buffer) Truncated() bool {
	return b.lost > 0 || b.total > int64(b.headMax+b.tailMax)
}

// Bytes returns everything written when it fit, or the head, a marker line
// saying how many bytes were dropped, and the tail. Cuts are moved to UTF-8
// character boundaries. Bytes dropped because the shared budget ran out are
// told by a marker at the end.
func (b *Buffer) Bytes() []byte {
	out := b.held()
	if b.lost > 0 {
		out = append(out, fmt.Sprintf("\n[... %d bytes truncated: the executor's output memory is used up by other commands ...]\n", b.lost)...)
	}
	return out
}

func (b *Buffer) held() []byte {
	tail := b.tail
	if len(tail) > b.tailMax {
		tail = tail[len(tail)-b.tailMax:]
	}
	kept := b.total - b.lost
	if kept <= int64(b.headMax+b.tailMax) {
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
	dropped := kept - int64(len(head)) - int64(len(tail))
	marker := fmt.Sprintf("\n[... %d bytes truncated ...]\n", dropped)
	out := make([]byte, 0, len(head)+len(marker)+len(tail))
	out = append(out, head...)
	out = append(out, marker...)
	return append(out, tail...)
}

// Reset empties the buffer and returns its memory to the budget.
func (b *Buffer) Reset() {
	b.budget.release(b.reserved)
	b.head, b.tail, b.total, b.lost, b.reserved = nil, nil, 0, 0, 0
}

// Release returns the buffer's memory to its budget; the buffer is empty
// afterwards.
func (b *Buffer) Release() { b.Reset() }
