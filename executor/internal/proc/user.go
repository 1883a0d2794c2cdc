package proc

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Identity is the user a command runs as.
type Identity struct {
	UID, GID uint32
	Groups   []uint32
	Name     string // empty for a uid without a passwd entry
	Home     string
}

// ErrNoSuchUser reports a user or group name missing from /etc/passwd or
// /etc/group.
var ErrNoSuchUser = errors.New("no such user")

// LookupUser resolves "name", "uid", "name:group" or "uid:gid" against the
// /etc/passwd and /etc/group of the file system the executor sees. A
// numeric uid without a passwd entry is allowed (home "/").
func LookupUser(spec string) (Identity, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	var id Identity
	var u *user.User
	var err error
	if n, perr := strconv.ParseUint(userPart, 10, 32); perr == nil {
		id.UID, id.GID, id.Home = uint32(n), uint32(n), "/"
		u, err = user.LookupId(userPart)
		if err != nil {
			u = nil
		}
	} else {
		u, err = user.Lookup(userPart)
		if err != nil {
			return Identity{}, fmt.Errorf("user %q: %w", userPart, ErrNoSuchUser)
		}
	}
	if u != nil {
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		id.UID, id.GID, id.Name, id.Home = uint32(uid), uint32(gid), u.Username, u.HomeDir
		if gids, err := u.GroupIds(); err == nil {
			for _, g := range gids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) != id.GID {
					id.Groups = append(id.Groups, uint32(n))
				}
			}
			sort.Slice(id.Groups, func(i, j int) bool { return id.Groups[i] < id.Groups[j] })
		}
	}
	if hasGroup {
		if n, perr := strconv.ParseUint(groupPart, 10, 32); perr == nil {
			id.GID = uint32(n)
		} else {
			g, err := user.LookupGroup(groupPart)
			if err != nil {
				return Identity{}, fmt.Errorf("group %q: %w", groupPart, ErrNoSuchUser)
			}
			n, _ := strconv.ParseUint(g.Gid, 10, 32)
			id.GID = uint32(n)
		}
	}
	if id.Home == "" {
		id.Home = "/"
	}
	return id, nil
}

// Current is the identity of the executor itself.
func Current() Identity {
	id, err := LookupUser(strconv.Itoa(os.Getuid()))
	if err != nil {
		return Identity{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Home: "/"}
	}
	id.GID = uint32(os.Getgid())
	return id
}

// Credential returns the credential to start a process as id, or nil when
// that is the executor's own identity. A non-root executor cannot switch.
func (id Identity) Credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		if id.UID != uint32(os.Geteuid()) || id.GID != uint32(os.Getegid()) {
			return nil, fmt.Errorf("cannot run as %d:%d: the executor is not root", id.UID, id.GID)
		}
		return nil, nil
	}
	return &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: id.Groups}, nil
}

// DefaultPath is PATH when neither the image nor the request sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BuildEnv merges base ("K=V" entries, e.g. the image's), then overrides,
// and fills in HOME, USER, LOGNAME and PATH when neither sets them.
func BuildEnv(base []string, overrides map[string]string, id Identity) []string {
	vals := make(map[string]string, len(base)+len(overrides)+4)
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if k != "" {
			set(k, v)
		}
	}
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(k, overrides[k])
	}
	defaults := [][2]string{{"PATH", DefaultPath}, {"HOME", id.Home}}
	if id.Name != "" {
		defaults = append(defaults, [2]string{"USER", id.Name}, [2]string{"LOGNAME", id.Name})
	}
	for _, d := range defaults {
		if _, ok := vals[d[0]]; !ok {
			set(d[0], d[1])
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env
}

// Getenv returns the value of key in env ("K=V" entries).
func Getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// ErrNotFound reports an executable missing from PATH.
var ErrNotFound = errors.New("executable file not found in PATH")

// LookPath finds file in the PATH of env, the way a shell would, resolving
// relative PATH entries against dir. A name with a slash is returned as is.
func LookPath(file string, env []string, dir string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := Getenv(env, "PATH")
	if path == "" {
		path = DefaultPath
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, file)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: %w", file, ErrNotFound)
}

// MaxTimeout caps every timeout a request can ask for.
const MaxTimeout = 7 * 24 * time.Hour

// Seconds converts a request's timeout in seconds to a duration, capped at
// MaxTimeout (which also keeps huge values from overflowing).
func Seconds(s float64) time.Duration {
	if s*float64(time.Second) >= float64(MaxTimeout) {
		return MaxTimeout
	}
	return time.Duration(s * float64(time.Second))
}
