package proc

import (
	"os"
	"sync"
	"time"
	"unicode/utf8"
)

// Output is where a command's output goes.
type Output struct {
	// Files are the read ends of its output (stdout first, then stderr,
	// or one terminal); Run closes them.
	Files []*os.File
	// Sink gets each read with the index of its file. An error stops the
	// reading and kills the command.
	Sink func(stream int, b []byte) error
	// WholeRunes holds back a UTF-8 sequence cut by a read until its end
	// arrives, so each piece is valid UTF-8 when the output is.
	WholeRunes bool
}

// Reader reads an Output to its end.
type Reader struct {
	files    []*os.File
	drained  chan struct{} // closed when every file reached EOF (or an error)
	failed   chan struct{} // closed when the sink failed
	failOnce sync.Once
}

// Read starts reading o's files, one goroutine each.
func (o Output) Read() *Reader {
	r := &Reader{files: o.Files, drained: make(chan struct{}), failed: make(chan struct{})}
	var wg sync.WaitGroup
	for i, f := range o.Files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !o.pump(f, i) {
				r.failOnce.Do(func() { close(r.failed) })
			}
		}()
	}
	go func() { wg.Wait(); close(r.drained) }()
	return r
}

// pump copies f to the sink until EOF or an error (EIO on a terminal whose
// last user left). It returns false when the sink failed.
func (o Output) pump(f *os.File, stream int) bool {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	held := 0
	for {
		n, err := f.Read(buf[held:])
		n += held
		held = 0
		if n > 0 {
			cut := n
			if o.WholeRunes && err == nil {
				cut = completeUTF8(buf[:n])
			}
			if cut > 0 && o.Sink(stream, buf[:cut]) != nil {
				return false
			}
			held = copy(buf, buf[cut:n])
		}
		if err != nil {
			return true
		}
	}
}

// finish waits up to grace for the output to reach its end, then stops
// reading (background children hold the pipes open), and closes the files.
func (r *Reader) finish(grace time.Duration) {
	select {
	case <-r.drained:
	default:
		t := time.NewTimer(grace)
		select {
		case <-r.drained:
		case <-t.C:
			closeFiles(r.files)
			<-r.drained
		}
		t.Stop()
	}
	closeFiles(r.files)
}

// readBufs recycles the buffers that read command output.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// completeUTF8 returns the length of b without a trailing incomplete
// multi-byte sequence (at most utf8.UTFMax-1 bytes are cut).
func completeUTF8(b []byte) int {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return len(b) // ASCII: nothing is open
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return len(b) - i
			}
			return len(b)
		}
	}
	return len(b)
}
