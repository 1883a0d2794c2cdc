package build

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// chmod is a COPY/ADD --chmod: an octal mode, or chmod(1)'s symbolic
// clauses (u+x,g-w,o=r) applied to each source's own mode.
type chmod struct {
	octal   *fs.FileMode
	clauses []chmodClause
}

type chmodClause struct {
	who  fs.FileMode // the bits of u, g, o this clause touches
	op   byte        // '+', '-', '='
	perm string      // rwxXst
}

// parseChmod parses a --chmod value; "" is no change (nil).
func parseChmod(s string) (*chmod, error) {
	if s == "" {
		return nil, nil
	}
	if m, err := strconv.ParseUint(s, 8, 32); err == nil {
		if m > 0o7777 {
			return nil, fmt.Errorf("--chmod=%s: mode out of range", s)
		}
		fm := fileMode(int64(m))
		return &chmod{octal: &fm}, nil
	}
	var c chmod
	for _, part := range strings.Split(s, ",") {
		i := strings.IndexAny(part, "+-=")
		if i < 0 || strings.Trim(part[:i], "ugoa") != "" || strings.Trim(part[i+1:], "rwxXst") != "" {
			return nil, fmt.Errorf("--chmod=%s: give an octal mode such as 0755 or symbolic clauses such as u+x,g-w", s)
		}
		var who fs.FileMode
		for _, w := range part[:i] {
			switch w {
			case 'u':
				who |= 0o700
			case 'g':
				who |= 0o070
			case 'o':
				who |= 0o007
			case 'a':
				who |= 0o777
			}
		}
		if who == 0 {
			who = 0o777
		}
		c.clauses = append(c.clauses, chmodClause{who: who, op: part[i], perm: part[i+1:]})
	}
	return &c, nil
}

// apply is the mode a source of mode m (a directory when dir) gets; the
// result carries the permission, setuid, setgid and sticky bits.
func (c *chmod) apply(m fs.FileMode, dir bool) fs.FileMode {
	if c == nil {
		return m
	}
	if c.octal != nil {
		return *c.octal
	}
	out := m & 0o777
	special := m & (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	for _, cl := range c.clauses {
		var bits fs.FileMode
		for _, p := range cl.perm {
			switch p {
			case 'r':
				bits |= 0o444
			case 'w':
				bits |= 0o222
			case 'x':
				bits |= 0o111
			case 'X':
				if dir || out&0o111 != 0 {
					bits |= 0o111
				}
			case 's':
				if cl.who&0o700 != 0 {
					special |= fs.ModeSetuid
				}
				if cl.who&0o070 != 0 {
					special |= fs.ModeSetgid
				}
			case 't':
				special |= fs.ModeSticky
			}
		}
		bits &= cl.who
		switch cl.op {
		case '+':
			out |= bits
		case '-':
			out &^= bits
		case '=':
			out = out&^cl.who | bits
		}
	}
	return out | special
}

// tarMode is a file mode as a tar header's Mode.
func tarMode(m fs.FileMode) int64 {
	out := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		out |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		out |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		out |= 0o1000
	}
	return out
}

// fileMode is a tar header's Mode as a file mode (permission, setuid,
// setgid and sticky bits).
func fileMode(mode int64) fs.FileMode {
	return (&tar.Header{Mode: mode, Typeflag: tar.TypeReg}).FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}
