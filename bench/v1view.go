package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// unifiedMount is where a hybrid host mounts its cgroup2 hierarchy.
const unifiedMount = "/sys/fs/cgroup/unified"

// hybridWithControllers reports whether the host mounts cgroup v1
// hierarchies under a tmpfs /sys/fs/cgroup and a cgroup2 hierarchy with
// controllers at unifiedMount: the layout crun 1.8 refuses ("cgroups in
// hybrid mode not supported").
func hybridWithControllers() bool {
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return false
	}
	if unix.Statfs(unifiedMount, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return false
	}
	data, err := os.ReadFile(filepath.Join(unifiedMount, "cgroup.controllers"))
	return err == nil && strings.TrimSpace(string(data)) != ""
}

// v1View is a mount namespace like the host's without its cgroup2 mount,
// kept open by a bind mount of its nsfs file, so that a runtime that
// refuses hybrid hosts sees only the v1 hierarchies and runs. Entering it
// costs the runtime's every command one exec of nsenter (util-linux).
type v1View struct {
	dir  string // a private bind mount of a temporary directory
	file string // dir/mnt, the namespace
}

// newV1View makes the namespace; Close removes it.
func newV1View(ctx context.Context) (*v1View, error) {
	if _, err := lookPath("nsenter", "util-linux"); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sbx-bench-v1view-")
	if err != nil {
		return nil, err
	}
	v := &v1View{dir: dir, file: filepath.Join(dir, "mnt")}
	// A namespace's file can only be bound onto a mount that does not
	// propagate into that namespace: a private bind of the directory.
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("bind %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		return nil, errors.Join(fmt.Errorf("make %s private: %w", dir, err), v.Close())
	}
	if err := os.WriteFile(v.file, nil, 0o600); err != nil {
		return nil, errors.Join(err, v.Close())
	}
	if _, err := runCmd(ctx, 10*time.Second, "unshare", "--mount="+v.file, "--propagation", "private",
		"umount", "-l", unifiedMount); err != nil {
		return nil, errors.Join(fmt.Errorf("make a mount namespace without %s: %w", unifiedMount, err), v.Close())
	}
	return v, nil
}

// wrap returns the command line that runs bin with args inside the view.
func (v *v1View) wrap(bin string, args []string) (string, []string) {
	return "nsenter", append([]string{"--mount=" + v.file, "--", bin}, args...)
}

// Close unmounts the namespace's file and the directory and removes it.
func (v *v1View) Close() error {
	if v == nil || v.dir == "" {
		return nil
	}
	err := unmountUnder(v.dir)
	if err == nil {
		err = os.RemoveAll(v.dir)
	}
	v.dir = ""
	return err
}
