package tlsca

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLeafVerifiesUnderTheCAAndItsConstraints(t *testing.T) {
	a, err := New("0123456789abcdef", []string{"api.example.com", "*.git.test", "**.deep.test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	for _, name := range []string{"api.example.com", "x.git.test", "a.b.deep.test", "API.Example.com."} {
		c, err := a.Leaf(name)
		if err != nil {
			t.Fatalf("leaf %s: %v", name, err)
		}
		want := strings.ToLower(strings.TrimSuffix(name, "."))
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: want, Roots: roots}); err != nil {
			t.Errorf("leaf %s does not verify: %v", name, err)
		}
	}
	for _, name := range []string{"example.com", "evil.test", "git.test.evil.test", ""} {
		if _, err := a.Leaf(name); err == nil {
			t.Errorf("minted a certificate for %q outside the constraints", name)
		}
	}
}

// A certificate for another name signed with the CA's key (as a stolen
// key would allow) still fails verification: the constraints are critical.
func TestNameConstraintsRejectOtherNames(t *testing.T) {
	a, err := New("id", []string{"api.example.com"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Certificate().PermittedDNSDomainsCritical {
		t.Fatal("constraints are not critical")
	}
	// Bypass Leaf's own check to mint outside the constraints.
	a.cert.PermittedDNSDomains = append(a.cert.PermittedDNSDomains, "evil.test")
	c, err := a.Leaf("www.evil.test")
	if err != nil {
		t.Fatal(err)
	}
	a.cert.PermittedDNSDomains = a.cert.PermittedDNSDomains[:1]
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "www.evil.test", Roots: roots}); err == nil {
		t.Fatal("a leaf outside the name constraints verified")
	}
}

func TestLeafCache(t *testing.T) {
	a, err := New("id", []string{"example.com"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := a.Leaf("example.com")
	c2, _ := a.Leaf("EXAMPLE.com")
	if c1 != c2 {
		t.Error("the second leaf for one name was minted again")
	}
	if c1.Leaf.NotAfter.After(a.NotAfter()) {
		t.Error("leaf outlives its CA")
	}
	a.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := a.Leaf("example.com"); err == nil {
		t.Error("minted after the CA expired")
	}
}

func TestNewRefusesBadDomains(t *testing.T) {
	for _, d := range [][]string{nil, {"*"}, {"**"}, {"a.b/c"}, {"com"}, {"1.2.3.4:443"}} {
		if _, err := New("id", d, time.Hour); err == nil {
			t.Errorf("New(%q) accepted", d)
		}
	}
}

func TestSaveLoadKeepsTheKeyPrivate(t *testing.T) {
	dir := t.TempDir()
	a, err := New("id", []string{"example.com"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Save(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if strings.Contains(string(a.CertPEM()), "PRIVATE") {
		t.Fatal("the certificate PEM holds a key")
	}
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Certificate().Equal(a.Certificate()) {
		t.Fatal("loaded a different CA")
	}
	c, err := b.Leaf("www.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(a.Certificate())
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "www.example.com", Roots: pool}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("loaded a key others can read")
	}
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); !os.IsNotExist(err) {
		t.Fatal("key left after Remove")
	}
}
