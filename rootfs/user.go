package rootfs

import (
	"errors"
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

// openInRoot opens path for reading, resolved inside root. The file comes
// from an image or a running sandbox: it is opened without blocking (a
// FIFO would hang the open, and with it the run holding the image store)
// and without following a last symlink out of the resolution, and it must
// be a regular file (ErrNotRegular otherwise); read it through a cap.
func openInRoot(root, path string) (*os.File, error) {
	h, err := pathrs.OpenInRoot(root, path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(h.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	f, err := pathrs.Reopen(h, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	// The handle was checked, the reopened file is the same inode; look
	// again anyway, it costs one call.
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	return f, nil
}

// ErrNotRegular: a file sbx reads on the host from an image or a sandbox
// root is a FIFO, device, socket or directory; sbx reads it as if absent.
var ErrNotRegular = errors.New("not a regular file")
