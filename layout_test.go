package sbx_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestsAreGroupedByArea: the root-only tests under tests/ live in
// area packages (tests/run, tests/images, ...), each named in tests/doc.go
// so a newcomer finds where a test goes; none sit in tests/ itself.
func TestTestsAreGroupedByArea(t *testing.T) {
	doc, err := os.ReadFile("tests/doc.go")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("tests")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() {
			if strings.HasSuffix(name, "_test.go") {
				t.Errorf("tests/%s: a test file in tests/ itself; move it to the area package it tests (tests/doc.go lists them, docs/contributing.md says which)", name)
			}
			continue
		}
		tests, _ := filepath.Glob(filepath.Join("tests", name, "*_test.go"))
		if len(tests) > 0 && !strings.Contains(string(doc), "\n//\t"+name+" ") && !strings.Contains(string(doc), "tests/"+name) {
			t.Errorf("tests/%s holds tests but tests/doc.go does not list it", name)
		}
	}
}

// TestFileNamesSayWhatTheyHold: no Go file is named after where a feature
// came from (docker): files are named by the operations they hold.
func TestFileNamesSayWhatTheyHold(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".go") && strings.Contains(strings.ToLower(d.Name()), "docker") {
			t.Errorf("%s: name the file by the operations it holds, not by docker", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDocumentSizes: README.md is a newcomer's first hour and
// BENCHMARKS.md the current table; history goes to CHANGELOG.md, git and
// docs/*.md.
func TestDocumentSizes(t *testing.T) {
	for file, max := range map[string]int{"README.md": 200, "BENCHMARKS.md": 300} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), "\n"); n > max {
			t.Errorf("%s has %d lines, at most %d: move detail to docs/*.md", file, n, max)
		}
	}
}
