package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"
)

// MaxLife caps the validity of a CA; a sandbox living longer gets its CA
// renewed by a new create (the proxy refuses to mint past expiry).
const MaxLife = 7 * 24 * time.Hour

// leafLife is how long a minted leaf certificate is valid; leaves are
// minted again once less than a quarter of it is left.
const leafLife = 24 * time.Hour

// maxLeaves caps the leaf cache of one authority.
const maxLeaves = 256

// Authority is one sandbox's CA. It is safe for concurrent use.
type Authority struct {
	cert    *x509.Certificate
	certDER []byte
	key     *ecdsa.PrivateKey
	// leafKey signs every leaf of this authority (one key per sandbox).
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
	now    func() time.Time
}

// New creates a CA whose certificates are valid only for names under
// domains (name constraints, marked critical), for life (capped at
// MaxLife). domains are host patterns of the policy: "api.example.com",
// "*.example.com" or "**.example.com" all constrain to example.com or
// below; the proxy itself decides which exact names it mints.
func New(sandbox string, domains []string, life time.Duration) (*Authority, error) {
	permitted, err := constraints(domains)
	if err != nil {
		return nil, err
	}
	if life <= 0 || life > MaxLife {
		life = MaxLife
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate sandbox CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "sbx sandbox CA " + short(sandbox), Organization: []string{"sbx"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(life),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permitted,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create sandbox CA: %w", err)
	}
	return fromParts(der, key)
}

// fromParts builds an Authority from its certificate and key.
func fromParts(der []byte, key *ecdsa.PrivateKey) (*Authority, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse sandbox CA: %w", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("sandbox CA: certificate and key do not belong together")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate leaf key: %w", err)
	}
	return &Authority{cert: cert, certDER: der, key: key, leafKey: leafKey,
		leaves: map[string]*tls.Certificate{}, now: time.Now}, nil
}

// constraints turns host patterns into permitted DNS domains, deduplicated.
func constraints(domains []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, d := range domains {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		d = strings.TrimPrefix(strings.TrimPrefix(d, "**."), "*.")
		if d == "" || strings.ContainsAny(d, "*/: ") || !strings.Contains(d, ".") && d != "localhost" {
			return nil, fmt.Errorf("sandbox CA: %q is not a host name to constrain to", d)
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("sandbox CA: no inspected hosts to constrain it to")
	}
	return out, nil
}

// Certificate is the CA certificate (no key).
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// NotAfter is when the CA expires.
func (a *Authority) NotAfter() time.Time { return a.cert.NotAfter }

// Leaf returns a certificate for the server name sni, signed by the CA,
// from the cache when a fresh one is there. Names outside the CA's
// constraints are refused here too, so no client is ever shown a chain
// it would reject.
func (a *Authority) Leaf(sni string) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(sni, "."))
	if name == "" {
		return nil, errors.New("no server name to mint a certificate for")
	}
	if !a.permits(name) {
		return nil, fmt.Errorf("server name %q is outside the sandbox CA's constraints", name)
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[name]; ok && fresh(c.Leaf, a.cert.NotAfter, now) {
		return c, nil
	}
	if now.After(a.cert.NotAfter) {
		return nil, errors.New("the sandbox CA has expired: recreate the sandbox")
	}
	notAfter := now.Add(leafLife)
	if notAfter.After(a.cert.NotAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, a.leafKey.Public(), a.key)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("mint certificate for %s: %w", name, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.certDER}, PrivateKey: a.leafKey, Leaf: leaf}
	if len(a.leaves) >= maxLeaves {
		clear(a.leaves)
	}
	a.leaves[name] = c
	return c, nil
}

// fresh reports whether a cached leaf can still be served at now: it has
// a quarter of its life left, or it already lasts as long as the CA.
func fresh(leaf *x509.Certificate, caNotAfter, now time.Time) bool {
	if !now.Before(leaf.NotAfter) {
		return false
	}
	return leaf.NotAfter.Sub(now) > leafLife/4 || leaf.NotAfter.Equal(caNotAfter)
}

// permits reports whether name lies within one of the CA's constraints.
func (a *Authority) permits(name string) bool {
	for _, d := range a.cert.PermittedDNSDomains {
		if name == d || strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}

// serial is a random 128-bit certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n.Add(n, big.NewInt(1))
}

// short is the first 12 characters of a sandbox id, for the CA's name.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
