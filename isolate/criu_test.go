package isolate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCRIU writes a script printing version as criu --version does.
func fakeCRIU(t *testing.T, dir, version string) string {
	t.Helper()
	p := filepath.Join(dir, "criu-"+version)
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho 'Version: "+version+"'\necho 'GitID: v"+version+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindCRIUChecksVersion(t *testing.T) {
	dir := t.TempDir()
	c := FindCRIU(fakeCRIU(t, dir, "4.2.1"))
	if c.Err != nil || c.Version != 40201 || c.VersionString() != "4.2.1" {
		t.Fatalf("4.2.1: %+v", c)
	}
	for _, old := range []string{"3.17.1", "4.1.1"} {
		c := FindCRIU(fakeCRIU(t, dir, old))
		if !errors.Is(c.Err, ErrNoCRIU) || !strings.Contains(c.Err.Error(), "too old") {
			t.Fatalf("%s: %+v, want too old", old, c)
		}
	}
	if c := FindCRIU(filepath.Join(dir, "missing")); !errors.Is(c.Err, ErrNoCRIU) {
		t.Fatalf("missing binary: %+v", c)
	}
}

func TestUseCRIUPutsItFirstOnPath(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	dir := t.TempDir()
	c := FindCRIU(fakeCRIU(t, dir, "4.2.0"))
	bin := filepath.Join(dir, "bin")
	if err := UseCRIU(c, bin); err != nil {
		t.Fatal(err)
	}
	if got := os.Getenv("PATH"); !strings.HasPrefix(got, bin+":") {
		t.Fatalf("PATH %q does not start with %s", got, bin)
	}
	if target, err := os.Readlink(filepath.Join(bin, "criu")); err != nil || target != c.Path {
		t.Fatalf("criu link: %q %v, want %s", target, err, c.Path)
	}
	// Again: PATH gets the directory once.
	if err := UseCRIU(c, bin); err != nil || strings.Count(os.Getenv("PATH"), bin) != 1 {
		t.Fatalf("second UseCRIU: %v, PATH %q", err, os.Getenv("PATH"))
	}
	criuPath.Lock()
	criuPath.dir, criuPath.target = "", ""
	criuPath.Unlock()
}
