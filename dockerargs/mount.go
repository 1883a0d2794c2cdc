package dockerargs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sbxrun/sbx"
)

// AddMountFlags adds docker's --mount values to opts: type=bind and
// type=volume (volumes) and type=tmpfs; local as in ParseVolume.
func AddMountFlags(opts *sbx.Options, mounts []string, local bool) error {
	for _, m := range mounts {
		v, t, err := ParseMount(m, local)
		if err != nil {
			return err
		}
		if t != nil {
			opts.Tmpfs = append(opts.Tmpfs, *t)
		} else {
			opts.Volumes = append(opts.Volumes, *v)
		}
	}
	return nil
}

// ParseMount parses one --mount value, docker's comma-separated KEY=VALUE
// list: type (bind, volume, the default: a named volume, or tmpfs), source/src, destination/dst/target, readonly/ro[=true|false],
// tmpfs-size; a bind's source as ParseVolume checks it. It returns a
// volume or a tmpfs mount.
func ParseMount(s string, local bool) (*sbx.Volume, *sbx.Tmpfs, error) {
	bad := func(why string) (*sbx.Volume, *sbx.Tmpfs, error) {
		return nil, nil, fmt.Errorf("invalid --mount %q: %s", s, why)
	}
	kind, src, dst, size := "volume", "", "", ""
	readonly := false
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "type":
			kind = v
		case "source", "src":
			src = v
		case "destination", "dst", "target":
			dst = v
		case "readonly", "ro":
			switch strings.ToLower(v) {
			case "", "true", "1":
				readonly = true
			case "false", "0":
				readonly = false
			default:
				return bad("readonly takes true or false")
			}
		case "tmpfs-size":
			size = v
		default:
			return bad(fmt.Sprintf("%q is not supported (type, source, target, readonly and tmpfs-size are)", k))
		}
	}
	if dst == "" {
		return bad("a target is required: target=PATH")
	}
	switch kind {
	case "bind":
		if size != "" {
			return bad("tmpfs-size is for type=tmpfs")
		}
		if !strings.ContainsRune(src, '/') {
			return bad("a bind needs source=HOST_PATH (a path; a name is type=volume)")
		}
		return volumeMount(s, src, dst, readonly, local)
	case "tmpfs":
		if src != "" || readonly {
			return bad("a tmpfs has no source and is writable")
		}
		spec := dst
		if size != "" {
			spec += ":size=" + size
		}
		t, err := sbx.ParseTmpfs(spec)
		if err != nil {
			return bad(err.Error())
		}
		return nil, &t, nil
	case "volume":
		if size != "" {
			return bad("tmpfs-size is for type=tmpfs")
		}
		if src == "" || strings.ContainsRune(src, '/') {
			return bad("a volume needs source=NAME, a named volume (sbx volume ls; anonymous volumes are not supported; a host path is type=bind)")
		}
		return volumeMount(s, src, dst, readonly, local)
	}
	return bad(fmt.Sprintf("type %q: use bind, volume or tmpfs", kind))
}

// volumeMount is a bind or volume --mount as -v SOURCE:TARGET[:ro] reads it.
func volumeMount(s, src, dst string, readonly, local bool) (*sbx.Volume, *sbx.Tmpfs, error) {
	opt := "rw"
	if readonly {
		opt = "ro"
	}
	v, err := ParseVolume(src+":"+dst+":"+opt, local)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid --mount %q: %w", s, errors.Unwrap(err))
	}
	return &v, nil, nil
}
