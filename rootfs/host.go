package rootfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// HostSystemDirs are the host directories a host-mode sandbox sees,
// read-only. Anything else of the host (/root, /home, /var, /run, /srv,
// /mnt, sbx's state) is never visible.
var HostSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// HostWorkdir is the default working directory of host-mode sandboxes.
const HostWorkdir = "/workspace"

// hiddenEtc are /etc entries never shown to a sandbox, besides every entry
// that is not world-readable (shadow files, private keys, credentials).
var hiddenEtc = []string{
	"shadow", "shadow-", "gshadow", "gshadow-", "security/opasswd",
	"ssl/private", "sbx", "docker", "containers/auth.json", ".pwd.lock",
	"sudoers", "sudoers.d", "krb5.keytab", "ssh/ssh_host_dsa_key", "ssh/ssh_host_ecdsa_key",
	"ssh/ssh_host_ed25519_key", "ssh/ssh_host_rsa_key", "wireguard", "ppp/chap-secrets", "ppp/pap-secrets",
}

// PrepareHost builds a host-mode root: the host's system directories
// read-only, /etc without secrets and writable in private, and a private
// writable layer with /tmp and the working directory on top.
func PrepareHost(dir string, o Options) (_ *Root, retErr error) {
	if o.UserNS != nil {
		return nil, errors.New("host mode does not run in a user namespace: use an image or --rootfs, or --userns host")
	}
	o.Dirs = append(append([]string{}, o.Dirs...), "/tmp", "/var/tmp", "/run", HostWorkdir, "/etc")
	r, err := newRoot(dir, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			_ = r.Release()
		}
	}()
	rw := filepath.Join(dir, rwDir)
	upper := filepath.Join(rw, "upper")
	for _, d := range HostSystemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue // e.g. no /lib32 on this host
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, fmt.Errorf("read host symlink %s: %w", d, err)
			}
			if err := os.Symlink(target, filepath.Join(upper, d)); err != nil {
				return nil, fmt.Errorf("recreate host symlink %s: %w", d, err)
			}
		case fi.IsDir():
			if err := os.MkdirAll(filepath.Join(upper, d), 0o755); err != nil {
				return nil, err
			}
			r.Mounts = append(r.Mounts, specs.Mount{Source: d, Destination: d, Type: "bind", Options: []string{"rbind", "ro", "nodev"}})
		}
	}
	// /etc: an overlay of the host's /etc whose upper layer hides secrets
	// with whiteouts and carries the sandbox's own hostname, hosts and
	// resolv.conf.
	etcUpper, etcWork, etcMerged := filepath.Join(rw, "etc-upper"), filepath.Join(rw, "etc-work"), filepath.Join(dir, etcDir)
	for _, d := range []string{etcUpper, etcWork, etcMerged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := hideEtcSecrets("/etc", etcUpper); err != nil {
		return nil, err
	}
	if err := writeEtc(rw, "etc-upper", o); err != nil {
		return nil, err
	}
	// The host's machine-id identifies the host: each sandbox gets its own.
	if err := os.WriteFile(filepath.Join(etcUpper, "machine-id"), []byte(newMachineID()+"\n"), 0o444); err != nil {
		return nil, fmt.Errorf("write /etc/machine-id: %w", err)
	}
	if err := mountOverlay(etcMerged, []string{"/etc"}, etcUpper, etcWork); err != nil {
		return nil, err
	}
	r.Mounts = append(r.Mounts, specs.Mount{Source: etcMerged, Destination: "/etc", Type: "bind", Options: []string{"bind", "nodev", "nosuid"}})
	empty := filepath.Join(dir, lowerDir)
	if err := os.Mkdir(empty, 0o755); err != nil {
		return nil, err
	}
	if err := mountOverlay(r.Path, []string{empty}, upper, filepath.Join(rw, "work")); err != nil {
		return nil, err
	}
	return r, nil
}

// hideEtcSecrets puts an overlay whiteout in upper for every entry of etc
// that is a known secret or not readable by everyone.
func hideEtcSecrets(etc, upper string) error {
	// Known secret names are hidden whether or not they exist yet, so a file
	// created later under that name stays hidden too.
	hide := map[string]bool{}
	for _, h := range hiddenEtc {
		hide[h] = true
	}
	err := filepath.WalkDir(etc, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == etc {
			return nil
		}
		rel, _ := filepath.Rel(etc, p)
		if hide[rel] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Mode().Perm()&0o004 == 0 {
			hide[rel] = true
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan /etc: %w", err)
	}
	for rel := range hide {
		target := filepath.Join(upper, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("hide /etc/%s: %w", rel, err)
		}
		if err := unix.Mknod(target, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("hide /etc/%s: %w", rel, err)
		}
	}
	return nil
}

// newMachineID is a random machine ID in the format of machine-id(5).
func newMachineID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
