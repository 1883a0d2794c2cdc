package shell

import (
	"bytes"
	"strconv"
)

// Marker bytes frame the prompt that ends every command: RS "SBX" nonce ":"
// exit code ":" cwd US. The shell prints it as its PS1, so it follows a
// command however the command ended (exit code, C-c, C-z), and it never
// reaches a reply.
const (
	markStart = 0x1e
	markEnd   = 0x1f
	// maxMarker bounds how long a partial marker is held back waiting for
	// its end byte: a nonce, an exit code and a path.
	maxMarker = 8192
)

// marker is one parsed prompt.
type marker struct {
	exitCode int
	cwd      string
}

// scanner splits a pty byte stream into output and markers.
type scanner struct {
	prefix []byte // markStart + "SBX" + nonce + ":"
	pend   []byte // bytes not yet classified: a possible partial marker
}

func newScanner(nonce string) *scanner {
	return &scanner{prefix: []byte("\x1eSBX" + nonce + ":")}
}

// feed classifies data: out receives plain output in order, mark each
// marker in its place.
func (s *scanner) feed(data []byte, out func([]byte), mark func(marker)) {
	s.pend = append(s.pend, data...)
	for len(s.pend) > 0 {
		i := bytes.IndexByte(s.pend, markStart)
		if i < 0 {
			out(s.pend)
			s.pend = s.pend[:0]
			return
		}
		if i > 0 {
			out(s.pend[:i])
		}
		rest := s.pend[i:]
		n := min(len(rest), len(s.prefix))
		if !bytes.Equal(rest[:n], s.prefix[:n]) {
			// Not our marker: a lone RS byte is output.
			out(rest[:1])
			s.pend = append(s.pend[:0], rest[1:]...)
			continue
		}
		j := bytes.IndexByte(rest, markEnd)
		if j < 0 {
			if len(rest) <= maxMarker {
				s.pend = append(s.pend[:0], rest...)
				return
			}
			out(rest[:1])
			s.pend = append(s.pend[:0], rest[1:]...)
			continue
		}
		if m, ok := parseMarker(rest[len(s.prefix):j]); ok && j >= len(s.prefix) {
			mark(m)
			s.pend = append(s.pend[:0], rest[j+1:]...)
			continue
		}
		out(rest[:1])
		s.pend = append(s.pend[:0], rest[1:]...)
	}
}

// flush returns a held-back partial marker as output (the stream ended).
func (s *scanner) flush(out func([]byte)) {
	if len(s.pend) > 0 {
		out(s.pend)
		s.pend = s.pend[:0]
	}
}

func parseMarker(b []byte) (marker, bool) {
	code, cwd, ok := bytes.Cut(b, []byte(":"))
	if !ok {
		return marker{}, false
	}
	n, err := strconv.Atoi(string(code))
	if err != nil {
		return marker{}, false
	}
	return marker{exitCode: n, cwd: string(cwd)}, true
}
