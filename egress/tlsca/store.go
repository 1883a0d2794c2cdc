package tlsca

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbxrun/sbx/internal/privatefile"
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
	if err := privatefile.Write(filepath.Join(dir, KeyFile), keyPEM); err != nil {
		return err
	}
	return privatefile.Write(filepath.Join(dir, CertFile), a.CertPEM())
}

// Load reads an authority saved by Save from dir.
func Load(dir string) (*Authority, error) {
	certPEM, err := privatefile.Read(filepath.Join(dir, CertFile), 1<<20)
	if err != nil {
		return nil, err
	}
	keyPEM, err := privatefile.Read(filepath.Join(dir, KeyFile), 1<<20)
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
