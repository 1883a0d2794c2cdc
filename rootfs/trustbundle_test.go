package rootfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const testCA = "-----BEGIN CERTIFICATE-----\nTESTCA\n-----END CERTIFICATE-----\n"

func writeFile(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAddTrustedCADebianAndAlpineLinks(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "etc/ssl/certs/ca-certificates.crt", "IMAGE-ROOTS")
	// Alpine: cert.pem is a link to the bundle (relative), which must be
	// written once, not twice.
	if err := os.Symlink("certs/ca-certificates.crt", filepath.Join(root, "etc/ssl/cert.pem")); err != nil {
		t.Fatal(err)
	}
	tc, err := AddTrustedCA(root, []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	if tc.Bundle != "/etc/ssl/certs/ca-certificates.crt" {
		t.Errorf("bundle %q", tc.Bundle)
	}
	got := readFile(t, root, "etc/ssl/certs/ca-certificates.crt")
	if got != "IMAGE-ROOTS\n"+testCA {
		t.Errorf("bundle content %q", got)
	}
	if readFile(t, root, strings.TrimPrefix(SandboxCAFile, "/")) != testCA {
		t.Error("CA file not written alone")
	}
	want := []string{"/etc/ssl/certs/ca-certificates.crt", SandboxCAFile}
	if !slices.Equal(tc.Written, want) {
		t.Errorf("written %q, want %q", tc.Written, want)
	}
	env := strings.Join(tc.Env(), " ")
	for _, w := range []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "REQUESTS_CA_BUNDLE=", "NODE_EXTRA_CA_CERTS=" + SandboxCAFile} {
		if !strings.Contains(env, w) {
			t.Errorf("env %q lacks %q", env, w)
		}
	}
}

func TestAddTrustedCARHELLayout(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "RHEL-ROOTS\n")
	if err := os.MkdirAll(filepath.Join(root, "etc/pki/tls/certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", filepath.Join(root, "etc/pki/tls/certs/ca-bundle.crt")); err != nil {
		t.Fatal(err)
	}
	tc, err := AddTrustedCA(root, []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	if tc.Bundle != "/etc/pki/tls/certs/ca-bundle.crt" {
		t.Errorf("bundle %q", tc.Bundle)
	}
	if got := readFile(t, root, "etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"); got != "RHEL-ROOTS\n"+testCA {
		t.Errorf("content %q", got)
	}
	if !slices.Contains(tc.Written, "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem") {
		t.Errorf("written %q", tc.Written)
	}
}

func TestAddTrustedCANoBundle(t *testing.T) {
	root := t.TempDir()
	tc, err := AddTrustedCA(root, []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root, "etc/ssl/certs/ca-certificates.crt"); got != testCA {
		t.Errorf("content %q", got)
	}
	if tc.Bundle != "/etc/ssl/certs/ca-certificates.crt" {
		t.Errorf("bundle %q", tc.Bundle)
	}
	want := []string{"/etc", "/etc/ssl", "/etc/ssl/certs", "/etc/ssl/certs/ca-certificates.crt", SandboxCAFile}
	if !slices.Equal(tc.Written, want) {
		t.Errorf("written %q, want %q", tc.Written, want)
	}
}

// A hostile image links its bundle out of the root: the link resolves
// inside the root, and the host file is never touched.
func TestAddTrustedCAStaysInsideTheRoot(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(outside, []byte("HOST"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/ssl/certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../../.."+outside, filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc/ssl/cert.pem")); err != nil {
		t.Fatal(err)
	}
	// The directory of the CA file is a link out of the root as well.
	if err := os.MkdirAll(filepath.Join(root, "etc/pki/tls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(root, "etc/pki/tls/certs")); err != nil {
		t.Fatal(err)
	}
	if _, err := AddTrustedCA(root, []byte(testCA)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "HOST" {
		t.Fatalf("host file changed: %q", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(outside))
	if len(entries) != 1 {
		t.Fatalf("files written outside the root: %v", entries)
	}
}

func TestAddTrustedCALeavesNonFilesAlone(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "etc/ssl/cert.pem", "ROOTS\n")
	tc, err := AddTrustedCA(root, []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	if tc.Bundle != "/etc/ssl/cert.pem" {
		t.Errorf("bundle %q", tc.Bundle)
	}
	if _, err := AddTrustedCA(root, []byte("not pem")); err == nil {
		t.Error("accepted a CA that is not PEM")
	}
}

// TestWithoutTrustedCA: what AddTrustedCA wrote, read back without the
// CA, is the image's bundle; the files that held only the CA are left
// out.
func TestWithoutTrustedCA(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "etc/ssl/certs/ca-certificates.crt", "IMAGE-ROOTS\n")
	tc, err := AddTrustedCA(root, []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	got, err := WithoutTrustedCA(root, append(tc.Written, "/etc/ssl/missing.pem"), []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["/etc/ssl/certs/ca-certificates.crt"]) != "IMAGE-ROOTS\n" {
		t.Errorf("without the CA: %q", got)
	}
}
