package rootfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// CABundlePaths are the CA bundle files TLS libraries read, in Go's probe
// order (crypto/x509 root_linux.go): Debian/Ubuntu/Alpine, RHEL/Fedora,
// openSUSE, older RHEL, RHEL's extracted bundle, Alpine/macOS-style.
var CABundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// SandboxCAFile is where the sandbox's egress CA certificate is written
// alone, for clients that add a CA to their own store (Node, Deno).
const SandboxCAFile = "/etc/ssl/certs/sbx-egress-ca.pem"

// maxBundleBytes caps the image bundle read on the host side.
const maxBundleBytes = 8 << 20

// TrustedCA says where AddTrustedCA put a CA certificate in a root.
type TrustedCA struct {
	// Bundle is the in-sandbox path of the combined bundle (the image's
	// first bundle plus the CA), for SSL_CERT_FILE and the like.
	Bundle string
	// Written are the in-sandbox paths of every file written (resolved,
	// so each is a real file of the root, not a link) and of every
	// directory made for them, for commit to leave out.
	Written []string
}

// Env is the environment that points clients at the CA: the combined
// bundle for those whose variable replaces their store, the CA alone for
// those whose variable adds to it.
func (t TrustedCA) Env() []string {
	var env []string
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO"} {
		env = append(env, k+"="+t.Bundle)
	}
	return append(env, "NODE_EXTRA_CA_CERTS="+SandboxCAFile, "DENO_CERT="+SandboxCAFile)
}

// AddTrustedCA appends the PEM certificate caPEM to every CA bundle of
// CABundlePaths the mounted root root has (each resolved inside root, so
// a link never leads out; links to one file write it once; anything but
// a regular file is left alone), and writes it alone at SandboxCAFile.
// A root without any bundle gets /etc/ssl/certs/ca-certificates.crt with
// the CA only. Writes go to the writable layer (the lower layers are
// never modified). Call it on the host side before the sandbox starts.
func AddTrustedCA(root string, caPEM []byte) (TrustedCA, error) {
	if !bytes.Contains(caPEM, []byte("-----BEGIN CERTIFICATE-----")) {
		return TrustedCA{}, errors.New("add trusted CA: not a PEM certificate")
	}
	rootDir, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return TrustedCA{}, fmt.Errorf("open the sandbox's root: %w", err)
	}
	defer rootDir.Close()
	var t TrustedCA
	seen := map[[2]uint64]bool{}
	for _, p := range CABundlePaths {
		real, ino, err := appendToBundle(rootDir, root, p, caPEM, seen)
		if err != nil {
			return TrustedCA{}, err
		}
		if real == "" {
			continue
		}
		seen[ino] = true
		t.Written = append(t.Written, real)
		if t.Bundle == "" {
			t.Bundle = p
		}
	}
	if t.Bundle == "" {
		t.Bundle = CABundlePaths[0]
		made, err := writeInRootMade(rootDir, t.Bundle, caPEM)
		if err != nil {
			return TrustedCA{}, err
		}
		t.Written = append(append(t.Written, made...), t.Bundle)
	}
	made, err := writeInRootMade(rootDir, SandboxCAFile, caPEM)
	if err != nil {
		return TrustedCA{}, err
	}
	t.Written = append(append(t.Written, made...), SandboxCAFile)
	return t, nil
}

// appendToBundle appends caPEM to the bundle at p in root, unless p is
// missing, not a regular file, or a file already done (by inode). It
// returns the resolved in-sandbox path it wrote, or "".
func appendToBundle(rootDir *os.File, root, p string, caPEM []byte, seen map[[2]uint64]bool) (string, [2]uint64, error) {
	h, err := pathrs.OpenatInRoot(rootDir, p)
	if err != nil {
		return "", [2]uint64{}, nil // missing, or a link leading nowhere
	}
	defer h.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(h.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", [2]uint64{}, nil
	}
	ino := [2]uint64{st.Dev, st.Ino}
	if seen[ino] {
		return "", ino, nil
	}
	real, err := inRootPath(h, root)
	if err != nil {
		return "", ino, err
	}
	f, err := pathrs.Reopen(h, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return "", ino, fmt.Errorf("read CA bundle %s: %w", p, err)
	}
	old, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+1))
	f.Close()
	if err != nil {
		return "", ino, fmt.Errorf("read CA bundle %s: %w", p, err)
	}
	if len(old) > maxBundleBytes {
		return "", ino, fmt.Errorf("CA bundle %s is larger than %d bytes", p, maxBundleBytes)
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	// Written by name in the writable layer: the overlay copies the file
	// up, so the image's layer keeps its bundle.
	if err := writeInRoot(rootDir, real, append(old, caPEM...)); err != nil {
		return "", ino, err
	}
	// The copy-up gave the file a new inode; remember that one too.
	if h2, err := pathrs.OpenatInRoot(rootDir, real); err == nil {
		if unix.Fstat(int(h2.Fd()), &st) == nil {
			seen[[2]uint64{st.Dev, st.Ino}] = true
		}
		h2.Close()
	}
	return real, ino, nil
}

// inRootPath is the path inside root of the file behind the handle h.
func inRootPath(h *os.File, root string) (string, error) {
	full, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", h.Fd()))
	if err != nil {
		return "", fmt.Errorf("resolve a CA bundle: %w", err)
	}
	root = strings.TrimSuffix(root, "/")
	if !strings.HasPrefix(full, root+"/") {
		return "", fmt.Errorf("a CA bundle resolved outside the sandbox's root (%s)", full)
	}
	return path.Clean(strings.TrimPrefix(full, root)), nil
}

// writeInRoot replaces the content of the in-sandbox file p (its parent
// resolved inside the root, made if missing; the file itself never a
// link), keeping the mode and owner of a file that is there.
func writeInRoot(rootDir *os.File, p string, data []byte) error {
	_, err := writeInRootMade(rootDir, p, data)
	return err
}

// writeInRootMade is writeInRoot, returning the directories it made.
func writeInRootMade(rootDir *os.File, p string, data []byte) ([]string, error) {
	var made []string
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		h, err := pathrs.OpenatInRoot(rootDir, d)
		if err == nil {
			h.Close()
			break
		}
		made = append([]string{d}, made...)
	}
	return made, writeFileInRoot(rootDir, p, data)
}

// writeFileInRoot is writeInRoot without the account of directories.
func writeFileInRoot(rootDir *os.File, p string, data []byte) error {
	dir, err := pathrs.MkdirAllHandle(rootDir, path.Dir(p), 0o755)
	if err != nil {
		return fmt.Errorf("write %s in the sandbox: %w", p, err)
	}
	defer dir.Close()
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	fd, err := unix.Openat(int(dir.Fd()), path.Base(p), flags, 0o644)
	if errors.Is(err, unix.ELOOP) {
		// A link that leads nowhere in the root: replace it by the file.
		if err = unix.Unlinkat(int(dir.Fd()), path.Base(p), 0); err == nil {
			fd, err = unix.Openat(int(dir.Fd()), path.Base(p), flags, 0o644)
		}
	}
	if err != nil {
		return fmt.Errorf("write %s in the sandbox: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return fmt.Errorf("%s in the sandbox is not a regular file", p)
	}
	f := os.NewFile(uintptr(fd), p)
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s in the sandbox: %w", p, werr)
	}
	return nil
}

// WithoutTrustedCA reads the files at paths (in-sandbox, as
// TrustedCA.Written lists them) in the mounted root and returns, for each
// regular file that holds more than the CA, its content with the CA
// certificate caPEM taken out (the last copy of it, which AddTrustedCA
// appended): the image's own bundle, for an export. Files that hold only
// the CA, directories and anything else are left out.
func WithoutTrustedCA(root string, paths []string, caPEM []byte) (map[string][]byte, error) {
	rootDir, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's root: %w", err)
	}
	defer rootDir.Close()
	out := map[string][]byte{}
	for _, p := range paths {
		h, err := pathrs.OpenatInRoot(rootDir, p)
		if err != nil {
			continue // gone, or a link leading nowhere
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(h.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			h.Close()
			continue
		}
		f, err := pathrs.Reopen(h, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY)
		h.Close()
		if err != nil {
			return nil, fmt.Errorf("read CA bundle %s: %w", p, err)
		}
		data, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+int64(len(caPEM))+2))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read CA bundle %s: %w", p, err)
		}
		if i := bytes.LastIndex(data, caPEM); i >= 0 {
			data = append(data[:i:i], data[i+len(caPEM):]...)
		}
		if len(bytes.TrimSpace(data)) > 0 {
			out[p] = data
		}
	}
	return out, nil
}
