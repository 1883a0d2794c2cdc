package isolate

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sbxrun/sbx/seccomp"
)

// The filter kept in memory for the built-in profile is the one the spec
// compiles to, for each capability set (the profile depends on it); a
// profile file is read and compiled again at every start, so a changed
// file changes the filter.
func TestFilterMemo(t *testing.T) {
	cache := t.TempDir()
	spec := func(add, drop []string, profile string) *Spec {
		return &Spec{ID: "f", Rootfs: "/", Args: []string{ExecutorPath, "executor"}, HelperSeccomp: true,
			CapAdd: add, CapDrop: drop, Seccomp: profile}
	}
	fresh := func(s *Spec) []byte {
		t.Helper()
		cfg, err := libcontainerConfig(s, true)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := seccomp.Compile(cfg.Seccomp)
		if err != nil {
			t.Fatal(err)
		}
		return prog
	}
	var progs [][]byte
	for _, s := range []*Spec{
		spec(nil, nil, ""),
		spec([]string{"SYS_ADMIN"}, nil, seccomp.Default), // the profile allows mount & co. with it
		spec(nil, []string{"ALL"}, ""),
	} {
		for round := 0; round < 3; round++ { // compiled, then from memory
			cfg, prog, err := build(s, cache)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Seccomp != nil {
				t.Fatal("the helper loads the filter: libcontainer's config must have none")
			}
			if want := fresh(s); !bytes.Equal(prog, want) {
				t.Fatalf("caps +%v -%v, round %d: filter differs from the spec's own", s.CapAdd, s.CapDrop, round)
			}
			if round == 2 {
				progs = append(progs, prog)
			}
		}
	}
	if bytes.Equal(progs[0], progs[1]) {
		t.Fatal("CAP_SYS_ADMIN got the default set's filter")
	}

	file := filepath.Join(t.TempDir(), "profile.json")
	write := func(action string) {
		t.Helper()
		body := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["chmod"],"action":"` + action + `"}]}`
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("SCMP_ACT_ERRNO")
	_, first, err := build(spec(nil, nil, file), cache)
	if err != nil {
		t.Fatal(err)
	}
	write("SCMP_ACT_KILL")
	_, second, err := build(spec(nil, nil, file), cache)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, second) {
		t.Fatal("a changed profile file kept its old filter")
	}
	if _, _, err := build(&Spec{ID: "f", Rootfs: "/", Args: []string{"/bin/sh"}, HelperSeccomp: true}, cache); err == nil {
		t.Fatal("HelperSeccomp with a command that loads no filter accepted (after the memo was filled)")
	}
}
