package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewFromEnv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("  from-the-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SBX_TOKEN", "")
	t.Setenv("SBX_TOKEN_FILE", file)
	c, err := NewFromEnv("127.0.0.1:1")
	if err != nil || c.opts.Token != "from-the-file-0123456789" {
		t.Fatalf("token from SBX_TOKEN_FILE: %v, %q", err, c.opts.Token)
	}
	t.Setenv("SBX_TOKEN", "from-the-variable")
	if c, err = NewFromEnv("127.0.0.1:1"); err != nil || c.opts.Token != "from-the-variable" {
		t.Fatalf("SBX_TOKEN wins: %v, %q", err, c.opts.Token)
	}
	t.Setenv("SBX_TOKEN", "")
	t.Setenv("SBX_TOKEN_FILE", filepath.Join(t.TempDir(), "missing"))
	if _, err = NewFromEnv("127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "read SBX_TOKEN_FILE") {
		t.Fatalf("missing token file: %v", err)
	}
}
