package dockerargs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sbxrun/sbx"
)

// AddMountFlags adds docker's --mount values to opts: type=bind (a volume)
// and type=tmpfs; local as in ParseVolume.
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
// list: type (bind or tmpfs; docker's default, volume, names a named
// volume), source/src, destination/dst/target, readonly/ro[=true|false],
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
		if src == "" {
			return bad("a bind needs source=HOST_PATH")
		}
		opt := "rw"
		if readonly {
			opt = "ro"
		}
		v, err := ParseVolume(src+":"+dst+":"+opt, local)
		if err != nil {
			return bad(errors.Unwrap(err).Error())
		}
		return &v, nil, nil
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
		return bad("type=volume (named volumes) is not supported; use type=bind,source=HOST_PATH or type=tmpfs")
	}
	return bad(fmt.Sprintf("type %q: use bind or tmpfs", kind))
}
