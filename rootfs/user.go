package rootfs

import (
	"fmt"
	"io"
	"os"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"github.com/moby/sys/user"
	"golang.org/x/sys/unix"
)

// User is a user resolved in a sandbox's root: numeric ids and home.
type User struct {
	UID, GID         int
	AdditionalGroups []int
	Home             string
}

// maxUserFile caps how much of /etc/passwd and /etc/group is read: they
// come from the image or a running sandbox and are hostile.
const maxUserFile = 4 << 20

// LookupUser resolves spec (a name, uid, name:group or uid:gid; empty for
// root) against /etc/passwd and /etc/group of root, the mounted root of a
// sandbox. The files are opened with in-root resolution (openat2
// RESOLVE_IN_ROOT where the kernel has it), so symlinks planted by an image
// or by a running sandbox cannot point outside root. Numeric ids need no
// entry in the files, as with docker; root's home is /root.
func LookupUser(root, spec string) (User, error) {
	defaults := &user.ExecUser{Uid: 0, Gid: 0, Home: "/"}
	if spec == "" {
		spec = "0:0"
	}
	var pr, gr io.Reader
	if passwd, err := openInRoot(root, "/etc/passwd"); err == nil {
		defer passwd.Close()
		pr = io.LimitReader(passwd, maxUserFile)
	}
	if group, err := openInRoot(root, "/etc/group"); err == nil {
		defer group.Close()
		gr = io.LimitReader(group, maxUserFile)
	}
	u, err := user.GetExecUser(spec, defaults, pr, gr)
	if err != nil {
		return User{}, fmt.Errorf("user %q of the sandbox: %w", spec, err)
	}
	if u.Uid == 0 && u.Home == "/" {
		u.Home = "/root"
	}
	return User{UID: u.Uid, GID: u.Gid, AdditionalGroups: u.Sgids, Home: u.Home}, nil
}

// openInRoot opens path for reading, resolved inside root.
func openInRoot(root, path string) (*os.File, error) {
	h, err := pathrs.OpenInRoot(root, path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return pathrs.Reopen(h, unix.O_RDONLY|unix.O_CLOEXEC)
}
