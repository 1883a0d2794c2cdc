package tlsca

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// File names in a sandbox's host-side state directory.
const (
	// CertFile holds the CA certificate (PEM); it is public.
	CertFile = "egress-ca.pem"
	// KeyFile holds the CA's private key (PEM, mode 0600); it never
	// leaves the host side.
	KeyFile = "egress-ca.key"
)

// CertPEM is the CA certificate in PEM form, what the sandbox trusts.
func (a *Authority) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.certDER})
}

// Save writes the certificate and the private key into dir (a host-side
// directory the sandbox never sees), the key with mode 0600. Existing
// files are replaced; nothing is followed through a symlink.
func (a *Authority) Save(dir string) error {
	keyDER, err := x509.MarshalECPrivateKey(a.key)
	if err != nil {
		return fmt.Errorf("encode sandbox CA key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := writePrivate(filepath.Join(dir, KeyFile), keyPEM); err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, CertFile), a.CertPEM())
}

// Load reads an authority saved by Save from dir.
func Load(dir string) (*Authority, error) {
	certPEM, err := readPrivate(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPrivate(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil || cb.Type != "CERTIFICATE" || kb.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("sandbox CA in %s is damaged: recreate the sandbox", dir)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sandbox CA key in %s: %w", dir, err)
	}
	return fromParts(cb.Bytes, key)
}

// Remove deletes the saved CA files from dir; missing files are fine.
func Remove(dir string) error {
	var errs []error
	for _, f := range []string{KeyFile, CertFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writePrivate writes data to path with mode 0600 through a temporary
// file and a rename, never through a symlink.
func writePrivate(path string, data []byte) error {
	tmp := path + ".new"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readPrivate reads a small file written by writePrivate, refusing
// symlinks and files others may write.
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || fi.Size() > 1<<20 {
		return nil, fmt.Errorf("%s is not a private file of sbx (mode %v): recreate the sandbox", path, fi.Mode())
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b.Bytes(), nil
}
