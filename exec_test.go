package sbx

import (
	"bytes"
	"errors"
	"testing"
)

// WriteOutput writes each stream to its writer and ends the exec when one
// fails.
func TestWriteOutput(t *testing.T) {
	var out, errb bytes.Buffer
	w := WriteOutput(&out, &errb)
	for _, f := range []ExecFrame{{Type: FrameStdout, Data: "1"}, {Type: FrameStderr, Data: "2"}, {Type: FrameStdout, Data: "3"}, {Type: FrameResult}} {
		if err := w(f); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != "13" || errb.String() != "2" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
	}
	if err := WriteOutput(failingWriter{}, &errb)(ExecFrame{Type: FrameStdout, Data: "x"}); err == nil {
		t.Fatal("a failing writer's error was dropped")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("full") }
