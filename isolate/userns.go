package isolate

import (
	"fmt"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// UserNS runs a sandbox in a user namespace made by the caller (package
// userns): the sandbox's ids 0..Size-1 are host ids HostID.., so root in
// the sandbox is an unprivileged host user for every per-user kernel limit
// and on every file. Path names the namespace (an nsfs file) for
// libcontainer to join.
type UserNS struct {
	Path   string
	HostID uint32
	Size   uint32
}

// applyUserNS makes the libcontainer configuration join the user
// namespace: the path to join, with its mappings (libcontainer needs them
// to translate ids; reading them from the path would cost a process).
func applyUserNS(cfg *configs.Config, u *UserNS) error {
	if u.Path == "" || u.Size == 0 {
		return fmt.Errorf("isolate: user namespace %+v needs a path and a size", *u)
	}
	cfg.Namespaces = append(cfg.Namespaces, configs.Namespace{Type: configs.NEWUSER, Path: u.Path})
	m := []configs.IDMap{{ContainerID: 0, HostID: int64(u.HostID), Size: int64(u.Size)}}
	cfg.UIDMappings, cfg.GIDMappings = m, m
	for _, d := range cfg.Devices {
		d.Uid, d.Gid = u.HostID, u.HostID
	}
	// Bind mounts given the "idmap" option (volumes with idmap=host) are
	// id-mapped through the same namespace: host files owned by uid 0 show
	// as the sandbox's root.
	for _, m := range cfg.Mounts {
		if m.IDMapping != nil {
			m.IDMapping.UserNSPath = u.Path
			m.IDMapping.UIDMappings, m.IDMapping.GIDMappings = nil, nil
		}
	}
	return nil
}

// userNSMounts adjusts the default mounts for a user namespace: sysfs can
// only be mounted in a network namespace the user namespace owns (the one
// libcontainer makes for NetworkNone); a joined one (bridge) or the host's
// gets the host's /sys bound read-only instead, as rootless runc does.
func userNSMounts(mounts []specs.Mount, network string) []specs.Mount {
	if network == "" || network == NetworkNone {
		return mounts
	}
	for i, m := range mounts {
		if m.Type == "sysfs" {
			mounts[i] = specs.Mount{Destination: m.Destination, Type: "bind", Source: "/sys",
				Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}}
		}
	}
	return mounts
}
