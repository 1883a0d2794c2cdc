package shell

import (
	"strings"
	"testing"
)

func TestScannerSplitsMarkersAcrossChunks(t *testing.T) {
	s := newScanner("abc")
	var out strings.Builder
	var marks []marker
	stream := "hello\x1e wo\x1eSBXzzz:1:/\x1frld\n\x1eSBXabc:42:/tmp/x y\x1fafter"
	for i := 0; i < len(stream); i++ { // byte by byte: every split point
		s.feed([]byte{stream[i]}, func(b []byte) { out.Write(b) }, func(m marker) { marks = append(marks, m) })
	}
	s.flush(func(b []byte) { out.Write(b) })
	if got, want := out.String(), "hello\x1e wo\x1eSBXzzz:1:/\x1frld\nafter"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	if len(marks) != 1 || marks[0].exitCode != 42 || marks[0].cwd != "/tmp/x y" {
		t.Fatalf("markers %+v", marks)
	}
}

func TestScannerRejectsMalformedMarker(t *testing.T) {
	s := newScanner("n")
	var out strings.Builder
	var marks int
	s.feed([]byte("\x1eSBXn:$?:$PWD\x1f."), func(b []byte) { out.Write(b) }, func(marker) { marks++ })
	if marks != 0 || out.String() != "\x1eSBXn:$?:$PWD\x1f." {
		t.Fatalf("marks=%d out=%q", marks, out.String())
	}
}

// TestNormalizeDropsEchoedLine: the typed line, echoed by a program that
// turned echo back on, is dropped whether it ends in "\r\n" or "\r\r\n".
func TestNormalizeDropsEchoedLine(t *testing.T) {
	echo := " . '/s/cmd'; . '/s/prompt'"
	for _, in := range []string{echo + "\r\nout\r\n", echo + "\r\r\nout\r\n"} {
		if got := normalize([]byte(in), echo); got != "out\n" {
			t.Fatalf("normalize(%q) = %q", in, got)
		}
	}
}
