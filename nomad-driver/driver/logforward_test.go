package driver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/helper/testlog"
	"golang.org/x/sys/unix"

	"github.com/sbxrun/sbx"
)

// collector gathers what a FIFO reader read.
type collector struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *collector) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// readUntil reads f into c until c holds want or f fails.
func (c *collector) readUntil(f *os.File, want string) {
	buf := make([]byte, 512)
	for !strings.Contains(c.String(), want) {
		n, err := f.Read(buf)
		c.mu.Lock()
		c.b.Write(buf[:n])
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// TestLogForwardingExactlyOnce forwards a real sandbox's output into FIFOs
// whose reader is replaced mid-stream (as a restarted Nomad client
// replaces its logmon) and whose forwarder is replaced mid-stream (as a
// restarted plugin resumes from the saved offset): every line arrives
// once, in order.
func TestLogForwardingExactlyOnce(t *testing.T) {
	e := newTaskEnv(t)
	host, err := e.d.sbxHost()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const lines = 300
	sb, err := host.Create(ctx, sbx.Options{
		Image: e.image,
		Cmd:   []string{"/bin/sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do i=$((i+1)); echo line $i; sleep 0.01; done", lines)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.d.removeSandbox(sb.ID) })
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}

	cfg := e.task(t, "fwd", TaskConfig{}, 32) // its task directory keeps the offset
	dir := t.TempDir()
	cfg.StdoutPath, cfg.StderrPath = filepath.Join(dir, "stdout.fifo"), filepath.Join(dir, "stderr.fifo")
	for _, p := range []string{cfg.StdoutPath, cfg.StderrPath} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// stderr has one reader all along (read-write: it never sees EOF).
	stderr, err := os.OpenFile(cfg.StderrPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	go func() { _, _ = io.Copy(io.Discard, stderr) }()

	forward := func() (*taskHandle, chan struct{}) {
		h := newTaskHandle(ctx, host, cfg, taskState{SandboxID: sb.ID}, testlog.HCLogger(t))
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.forwardLogs()
		}()
		return h, done
	}
	var got collector

	// The first reader reads a while, stops reading (as logmon does when
	// its client died) and goes away, leaving output unread in the pipe.
	h1, done1 := forward()
	r1, err := os.OpenFile(cfg.StdoutPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	got.readUntil(r1, "line 50\n")
	time.Sleep(200 * time.Millisecond)
	r1.Close()
	time.Sleep(300 * time.Millisecond) // the forwarder's next write fails meanwhile

	// The second reader gets what the first left, then the rest. Midway,
	// the forwarder is replaced.
	r2, err := os.OpenFile(cfg.StdoutPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	r2done := make(chan struct{})
	go func() {
		defer close(r2done)
		got.readUntil(r2, fmt.Sprintf("line %d\n", lines))
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(got.String(), "line 150\n") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-done1:
		t.Fatal("the first forwarder gave up")
	default:
	}
	h1.cancel()
	<-done1
	_, done2 := forward()
	select {
	case <-done2: // the command ended and its output is all in
	case <-ctx.Done():
		t.Fatalf("the second forwarder did not finish; got %q", got.String())
	}
	select {
	case <-r2done:
	case <-time.After(10 * time.Second):
	}
	if got.String() != want.String() {
		t.Fatalf("forwarded output is not every line once in order:\n%s", got.String())
	}
	off, err := openLogOffset(filepath.Join(cfg.TaskDir().Dir, logOffsetFile))
	if err != nil {
		t.Fatal(err)
	}
	defer off.close()
	if off.get() != int64(want.Len()) {
		t.Errorf("saved offset %d, want %d", off.get(), want.Len())
	}
}

// TestLogOffsetFile: the saved offset survives a reopen, a file of the
// previous format (a bare number) is read, and garbage reads as 0.
func TestLogOffsetFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), logOffsetFile)
	o, err := openLogOffset(path)
	if err != nil || o.get() != 0 {
		t.Fatalf("new offset file: %d %v", o.get(), err)
	}
	o.save(123456789)
	o.save(42)
	o.close()
	if o, _ = openLogOffset(path); o.get() != 42 {
		t.Errorf("reopened: %d, want 42", o.get())
	}
	o.close()
	for content, want := range map[string]int64{"987": 987, "12\n": 12, "junk": 0, "-5": 0} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if o, _ = openLogOffset(path); o.get() != want {
			t.Errorf("%q read as %d, want %d", content, o.get(), want)
		}
		o.close()
	}
}

// BenchmarkLogOffsetSave is the cost of saving the offset before every
// chunk of output, next to the cost of writing a 100-byte line into a FIFO
// (BenchmarkFIFOWriteLine), the least a forwarded chunk costs anyway.
func BenchmarkLogOffsetSave(b *testing.B) {
	o, err := openLogOffset(filepath.Join(b.TempDir(), logOffsetFile))
	if err != nil {
		b.Fatal(err)
	}
	defer o.close()
	for i := 0; b.Loop(); i++ {
		o.save(int64(i) * 100)
	}
}

func BenchmarkFIFOWriteLine(b *testing.B) {
	path := filepath.Join(b.TempDir(), "fifo")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		b.Fatal(err)
	}
	r, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	line := strings.Repeat("x", 99) + "\n"
	for b.Loop() {
		if _, err := io.WriteString(w, line); err != nil {
			b.Fatal(err)
		}
	}
}
