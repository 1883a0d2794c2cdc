package sbx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The command-line forms of options, as docker spells them, for every
// front-end that takes them as text. The errors of ParseVolume and
// ParseTmpfs say what is wrong with the text; the caller names the option
// ("invalid --volume "a": ...").

var errVolumeSyntax = errors.New("use HOST:CONTAINER[:OPTIONS], OPTIONS a comma-separated list of ro or rw and idmap=host")

// ParseVolume parses a volume as SOURCE:CONTAINER[:OPTIONS], OPTIONS a
// comma-separated list of ro or rw and idmap=host (Volume.IDMap). A
// SOURCE without a '/' is the name of a volume (Volume.Name), as in
// docker; otherwise it is a host path, taken as given: a front-end on the
// sandboxes' host may make it absolute and check that it exists.
func ParseVolume(s string) (Volume, error) {
	parts := strings.Split(s, ":")
	var v Volume
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return v, errVolumeSyntax
	}
	v.HostPath, v.Path = parts[0], parts[1]
	if IsVolumeName(parts[0]) {
		if err := ValidVolumeName(parts[0]); err != nil {
			return v, err
		}
		v.Name, v.HostPath = parts[0], ""
	}
	if len(parts) == 2 {
		return v, nil
	}
	mode := ""
	for _, o := range strings.Split(parts[2], ",") {
		switch {
		case (o == "ro" || o == "rw") && mode == "":
			mode, v.ReadOnly = o, o == "ro"
		case o == "idmap="+VolumeIDMapHost && v.IDMap == "":
			v.IDMap = VolumeIDMapHost
		default:
			return Volume{}, errVolumeSyntax
		}
	}
	return v, nil
}

// ParseTmpfs parses a tmpfs mount as CONTAINER[:size=SIZE] (a size like
// "64m", see ParseSize).
func ParseTmpfs(s string) (Tmpfs, error) {
	p, opt, hasOpt := strings.Cut(s, ":")
	t := Tmpfs{Path: p}
	if hasOpt {
		v, ok := strings.CutPrefix(opt, "size=")
		if !ok {
			return t, errors.New("use PATH[:size=SIZE]")
		}
		n, err := ParseSize(v)
		if err != nil || n <= 0 {
			return t, errors.New("bad size")
		}
		t.SizeBytes = n
	}
	return t, nil
}

// EnvEntry turns KEY=VALUE into itself and KEY into KEY=<its value from
// lookup> (os.LookupEnv for a CLI), or "" when lookup has no such
// variable, as docker's --env does.
func EnvEntry(e string, lookup func(string) (string, bool)) (string, error) {
	k, _, hasValue := strings.Cut(e, "=")
	if k == "" || strings.ContainsAny(k, " \t\x00") {
		return "", fmt.Errorf("invalid environment variable %q: use KEY=VALUE", e)
	}
	if hasValue {
		return e, nil
	}
	if v, ok := lookup(k); ok {
		return k + "=" + v, nil
	}
	return "", nil
}

// ReadEnvFile reads an environment file as docker's --env-file does: one
// KEY=VALUE or KEY (see EnvEntry) a line, blank lines and lines starting
// with # skipped. name labels errors.
func ReadEnvFile(r io.Reader, name string, lookup func(string) (string, bool)) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := EnvEntry(line, lookup)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if v != "" {
			out = append(out, v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return out, nil
}
