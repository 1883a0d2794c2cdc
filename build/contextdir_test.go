package build

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// COPY --parents keeps the paths from the context's root (or from a /./
// in the source), ** spans directories, and --exclude drops what its
// pattern matches below each source.
func TestCopySourcesParentsAndExclude(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"x/a.txt", "y/a.txt", "x/y/b.txt", "x/y/c.md", "src/a.txt", "src/x/b.txt", "src/x/y/c.txt", "src/x/d.go", "home.txt", "homes/notes.md", "homes/keep"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bc, err := openContext(dir, filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer bc.close()
	for _, c := range []struct {
		srcs     []string
		parents  bool
		excludes []string
		want     []string
	}{
		{[]string{"./x/a.txt", "./y/a.txt"}, true, nil, []string{"x/a.txt", "y/a.txt"}},
		{[]string{"./x/./y/*.txt"}, true, nil, []string{"y/b.txt"}},
		{[]string{"./src/**/*.txt"}, true, nil, []string{"src/a.txt", "src/x/b.txt", "src/x/y/c.txt"}},
		{[]string{"x/y"}, true, nil, []string{"x/y/b.txt", "x/y/c.md"}},
		{[]string{"hom*"}, false, []string{"*.txt"}, []string{"keep", "notes.md"}},
		{[]string{"hom*"}, false, []string{"*.txt", "*.md"}, []string{"keep"}},
		{[]string{"src"}, false, []string{"x/y"}, []string{"a.txt", "x", "x/b.txt", "x/d.go"}},
		{[]string{"src"}, true, []string{"**/*.txt"}, []string{"src/x", "src/x/d.go", "src/x/y"}},
	} {
		entries, single, err := bc.copySources(c.srcs, c.parents, c.excludes)
		if err != nil {
			t.Fatalf("%v parents=%v exclude=%v: %v", c.srcs, c.parents, c.excludes, err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.name)
		}
		if !reflect.DeepEqual(got, c.want) || single {
			t.Errorf("%v parents=%v exclude=%v: %q (single %v), want %q", c.srcs, c.parents, c.excludes, got, single, c.want)
		}
	}
	if _, _, err := bc.copySources([]string{"../x/./a"}, true, nil); err == nil {
		t.Error("a source outside the context was accepted")
	}
}
