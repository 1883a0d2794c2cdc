package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// maxExecutorLog caps executor.log, PID 1's own output kept in the
// sandbox's runtime directory (on the host's tmpfs): a taken-over
// executor filled 50 MB of it. Its warnings at start-up are what the file
// is for.
const maxExecutorLog = 64 << 10

// executorOutput is the stdout and stderr of a sandbox's PID 1 (the
// executor): a pipe this process reads while it starts the executor,
// keeping the first maxExecutorLog bytes of the file's life in
// executor.log. Once the executor is ready (or failed) the pipe is
// closed: later writes fail (EPIPE; the executor catches SIGPIPE) and
// nothing of them is kept on the host, so nothing the sandbox's PID 1
// writes grows the host's memory. Output after start-up is lost; that is
// the price of having no daemon to read it.
type executorOutput struct {
	// W is PID 1's stdout and stderr.
	W    *os.File
	r    *os.File
	done chan struct{}
	once sync.Once
}

// openExecutorOutput starts capturing into run's executor.log.
func openExecutorOutput(run string) (*executorOutput, error) {
	f, err := os.OpenFile(filepath.Join(run, executorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	left := int64(maxExecutorLog)
	if st, err := f.Stat(); err == nil {
		left -= st.Size()
	}
	r, w, err := os.Pipe()
	if err != nil {
		f.Close()
		return nil, err
	}
	o := &executorOutput{W: w, r: r, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		defer f.Close()
		if left > 0 {
			_, _ = io.Copy(f, io.LimitReader(r, left))
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return o, nil
}

// close ends the capture: what was written is in executor.log when it
// returns.
func (o *executorOutput) close() {
	o.once.Do(func() {
		o.W.Close()
		o.r.Close()
		<-o.done
	})
}

// logTail returns the end of executor.log at path, for an error.
func logTail(path string) string {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, 2*maxExecutorLog))
	if len(data) == 0 {
		return ""
	}
	if len(data) > 1000 {
		data = data[len(data)-1000:]
	}
	return "\nexecutor output:\n" + strings.TrimSpace(string(data))
}
