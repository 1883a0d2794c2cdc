package inspect

import (
	"io"
	"net/http"
	"sort"
	"strings"
)

// scrubber replaces secret values by their placeholders in what comes
// back from a host, so the sandbox never reads a value even when the
// host echoes it.
type scrubber struct {
	pairs  []string // value, placeholder, ... longest value first
	maxLen int
}

// newScrubber returns a scrubber for the secrets, or nil if none has a
// value.
func newScrubber(secrets []Secret) *scrubber {
	ss := make([]Secret, 0, len(secrets))
	for _, s := range secrets {
		if s.Value != "" {
			ss = append(ss, s)
		}
	}
	if len(ss) == 0 {
		return nil
	}
	sort.Slice(ss, func(i, j int) bool { return len(ss[i].Value) > len(ss[j].Value) })
	sc := &scrubber{}
	for _, s := range ss {
		sc.pairs = append(sc.pairs, s.Value, s.Placeholder)
		sc.maxLen = max(sc.maxLen, len(s.Value))
	}
	return sc
}

// replace scrubs one string.
func (sc *scrubber) replace(s string) string {
	for i := 0; i < len(sc.pairs); i += 2 {
		s = strings.ReplaceAll(s, sc.pairs[i], sc.pairs[i+1])
	}
	return s
}

// headers scrubs every header value.
func (sc *scrubber) headers(h http.Header) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = sc.replace(v)
		}
		h[k] = vs
	}
}

// partialAt is where a proper prefix of a value starts at the end of s,
// or len(s): bytes from there must wait for what follows.
func (sc *scrubber) partialAt(s string) int {
	for i := max(0, len(s)-sc.maxLen+1); i < len(s); i++ {
		tail := s[i:]
		for j := 0; j < len(sc.pairs); j += 2 {
			if v := sc.pairs[j]; len(tail) < len(v) && strings.HasPrefix(v, tail) {
				return i
			}
		}
	}
	return len(s)
}

// body wraps a response body so that the values are scrubbed in a
// stream, holding back only what could be the start of a value.
func (sc *scrubber) body(rc io.ReadCloser) io.ReadCloser {
	return &scrubReader{sc: sc, rc: rc}
}

type scrubReader struct {
	sc      *scrubber
	rc      io.ReadCloser
	pending string // read but possibly the start of a value
	out     string // scrubbed, not yet returned
	err     error
}

func (r *scrubReader) Read(p []byte) (int, error) {
	for r.out == "" {
		if r.err != nil {
			if r.pending != "" {
				r.out, r.pending = r.sc.replace(r.pending), ""
				continue
			}
			return 0, r.err
		}
		buf := make([]byte, 32<<10)
		n, err := r.rc.Read(buf)
		r.err = err
		s := r.sc.replace(r.pending + string(buf[:n]))
		cut := len(s)
		if err == nil {
			cut = r.sc.partialAt(s)
		}
		r.out, r.pending = s[:cut], s[cut:]
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *scrubReader) Close() error { return r.rc.Close() }
