// Package logring keeps the latest output of a long-running process within
// a fixed number of bytes. Every byte has an absolute offset in the
// process's output, so a reader can resume where it stopped, follow new
// output as it comes, and learn how much it missed when the ring moved on
// without it. A ring that runs for days costs the same memory as one that
// runs for a second.
package logring

import (
	"sync"
	"time"
)

// chunkOverhead is what one chunk is counted as beyond its data, so that a
// flood of one-byte writes is bounded too.
const chunkOverhead = 64

// Chunk is one write of the process, as kept by the ring.
type Chunk struct {
	// Stream names the output ("stdout", "stderr").
	Stream string
	// Time is when the write was read.
	Time time.Time
	// Offset is the absolute offset of Data[0] in the process's output.
	Offset int64
	// Data is the output; callers must not modify it.
	Data []byte
}

// Ring holds the most recent output up to its size. It is safe for
// concurrent use.
type Ring struct {
	mu      sync.Mutex
	max     int
	chunks  []Chunk // oldest first
	held    int     // bytes counted against max: data plus chunkOverhead per chunk
	start   int64   // offset of the oldest byte held
	end     int64   // offset after the newest byte written
	changed chan struct{}
}

// New returns a ring that keeps about max bytes (at least 4 KiB).
func New(max int) *Ring {
	if max < 4<<10 {
		max = 4 << 10
	}
	return &Ring{max: max, changed: make(chan struct{})}
}

// Write appends a copy of p as output of stream. Old output is dropped to
// stay within the ring's size.
func (r *Ring) Write(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A write larger than the whole ring keeps only its end.
	if room := r.max - chunkOverhead; len(p) > room {
		skip := len(p) - room
		r.end += int64(skip)
		p = p[skip:]
	}
	r.chunks = append(r.chunks, Chunk{Stream: stream, Time: time.Now(), Offset: r.end, Data: append([]byte(nil), p...)})
	r.end += int64(len(p))
	r.held += len(p) + chunkOverhead
	drop := 0
	for r.held > r.max && drop < len(r.chunks)-1 {
		r.held -= len(r.chunks[drop].Data) + chunkOverhead
		drop++
	}
	if drop > 0 {
		// Copy down rather than reslice, so the backing array does not
		// grow without bound behind the window.
		n := copy(r.chunks, r.chunks[drop:])
		clear(r.chunks[n:])
		r.chunks = r.chunks[:n]
	}
	r.start = r.chunks[0].Offset
	close(r.changed)
	r.changed = make(chan struct{})
}

// Read returns the chunks holding output at or after offset since, at most
// about limit bytes of data (at least one chunk when there is any), the
// offset to read from next, and how many bytes between since and the
// oldest byte held were lost because the ring moved on. A chunk that
// starts before since is cut to start at it.
func (r *Ring) Read(since int64, limit int) (chunks []Chunk, next, lost int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if since < 0 {
		since = 0
	}
	if since < r.start {
		lost = r.start - since
		since = r.start
	}
	if since >= r.end {
		return nil, max(since, r.end), lost
	}
	size := 0
	next = since
	for _, c := range r.chunks {
		cEnd := c.Offset + int64(len(c.Data))
		if cEnd <= since {
			continue
		}
		if size > 0 && size+len(c.Data) > limit {
			break
		}
		if c.Offset < since {
			c.Data = c.Data[since-c.Offset:]
			c.Offset = since
		}
		chunks = append(chunks, c)
		size += len(c.Data)
		next = cEnd
	}
	return chunks, next, lost
}

// TailOffset returns the offset from which the last n bytes of output
// start (never before the oldest byte held).
func (r *Ring) TailOffset(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.end-n, r.start)
}

// End returns the offset after the newest byte written: the total output.
func (r *Ring) End() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// Changed returns a channel closed at the next write.
func (r *Ring) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}
