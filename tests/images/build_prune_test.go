package images

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sbxrun/sbx"
	"github.com/sbxrun/sbx/tests/internal/harness"
)

// TestBuildPruneAndDiskUsage: system df counts the build cache (step
// images and cache mounts), build prune removes it and nothing else, and
// the next build does its steps again.
func TestBuildPruneAndDiskUsage(t *testing.T) {
	h := harness.NewHost(t)
	h.Env = []string{"SBX_PULL=never"}
	base := h.ImportBusybox(t, "prune-base:1")
	ctx := buildContextDir(t, map[string]string{
		"Dockerfile": "FROM " + base + "\nRUN --mount=type=cache,target=/c echo x >> /c/log && wc -l < /c/log > /n\nRUN echo layer > /l\n",
	})
	h.Must(t, "build", "-t", "pruned:1", ctx)
	df := func() sbx.DiskUsage {
		var du sbx.DiskUsage
		if err := json.Unmarshal([]byte(h.Must(t, "system", "df", "--format", "json")), &du); err != nil {
			t.Fatal(err)
		}
		return du
	}
	// The step layers are all the built image's: nothing to reclaim yet
	// but the cache mount.
	du := df()
	if du.BuildCacheImages != 2 || du.BuildCacheBytes != 0 || du.BuildCacheMountBytes != 2 {
		t.Fatalf("system df after a build: %+v", du)
	}
	h.Must(t, "tag", "pruned:1", "kept:1")
	h.Must(t, "rmi", "pruned:1")
	h.Must(t, "rmi", "kept:1")
	if du := df(); du.BuildCacheImages != 2 || du.BuildCacheBytes == 0 {
		t.Fatalf("system df once the built image is gone: %+v", du)
	}
	if out := h.Must(t, "system", "df"); !strings.Contains(out, "Build cache") {
		t.Errorf("system df has no build cache row:\n%s", out)
	}
	if r := h.Sbx(t, "", "build", "prune"); r.Code == 0 || !strings.Contains(r.Stderr, "-f") {
		t.Fatalf("build prune without -f and without a terminal: %d %s", r.Code, r.Stderr)
	}
	out := h.Must(t, "build", "prune", "-f")
	if !strings.Contains(out, "removed 2 build steps and 1 cache mounts") || strings.Contains(out, " 0 layers") {
		t.Fatalf("build prune: %s", out)
	}
	if du := df(); du.BuildCacheImages != 0 || du.BuildCacheBytes != 0 || du.BuildCacheMountBytes != 0 {
		t.Fatalf("system df after build prune: %+v", du)
	}
	// Other images stay; the next build runs its steps again, with an
	// empty cache mount.
	if out := h.Must(t, "run", "--rm", base, "echo", "base"); out != "base\n" {
		t.Fatalf("the base image after prune: %q", out)
	}
	r := h.Sbx(t, "", "build", "-t", "pruned:2", ctx)
	if m := builtSteps.FindStringSubmatch(r.Stderr); r.Code != 0 || m == nil || m[2] != "0" {
		t.Fatalf("a build after prune should do every step: %d\n%s", r.Code, r.Stderr)
	}
	if out := h.Must(t, "run", "--rm", "pruned:2", "cat", "/n"); out != "1\n" {
		t.Fatalf("the cache mount after prune held %q lines", out)
	}
}
