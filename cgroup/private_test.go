package cgroup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxrun/sbx/internal/roottest"
)

// A process whose parent is already chosen keeps it; PrivateParent of a
// process that chose none names one after the process and removes it, made
// in every hierarchy, once empty.
func TestPrivateParent(t *testing.T) {
	roottest.Require(t, "it creates and removes a parent cgroup")
	t.Setenv(ParentEnv, "sbx-test-kept")
	if err := PrivateParent("other")(); err != nil || Parent() != "sbx-test-kept" {
		t.Fatalf("an inherited parent was replaced: %q, %v", Parent(), err)
	}
	t.Setenv(ParentEnv, "")
	release := PrivateParent("sbx-test-private")
	name := Parent()
	if filepath.Dir(name) != "." || name == DefaultParent || len(name) <= len("sbx-test-private-") {
		t.Fatalf("private parent named %q", name)
	}
	if err := EnsureParent(Limits{}); err != nil {
		t.Fatal(err)
	}
	made := parentDirs()
	if len(made) == 0 {
		t.Fatalf("EnsureParent made no %s directory", name)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for _, d := range made {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there after release (%v)", d, err)
		}
	}
}

// parentDirs lists the directories of the current parent in every hierarchy.
func parentDirs() []string {
	dirs, _ := filepath.Glob(filepath.Join(Root, "*", Parent()))
	if _, err := os.Stat(filepath.Join(Root, Parent())); err == nil {
		dirs = append(dirs, filepath.Join(Root, Parent()))
	}
	return dirs
}
