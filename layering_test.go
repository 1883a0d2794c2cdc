package sbx_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The layering of the module (DESIGN.md, "One library, one front door"):
// front-ends reach the host only through sandbox.Host, and the contract
// needs nothing but the standard library.

const module = "github.com/sbxrun/sbx"

// listedPackage is what `go list -deps -json` says of one package.
type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *struct{ Path string }
	Imports    []string
	Deps       []string
	GoFiles    []string
	CgoFiles   []string
}

// layeringRule forbids packages matching From to import packages matching
// any of Not directly (a prefix ending in "/" matches a subtree).
type layeringRule struct {
	From   string
	Not    []string
	Reason string
	// Except are imports allowed despite Not.
	Except []string
}

var layeringRules = []layeringRule{
	{From: module + "/cmd/sbx",
		Not:    []string{module + "/netns", module + "/cgroup", module + "/seccomp", module + "/imagecache", module + "/isolate", module + "/isolate/"},
		Reason: "the CLI reaches the host through sandbox.Host (and sandbox.Init)"},
	{From: module + "/server/", Not: []string{module + "/netns", module + "/cgroup", module + "/isolate", module + "/isolate/"},
		Reason: "the server is decode, call, encode over the contract"},
	{From: module + "/server", Not: []string{module + "/netns", module + "/cgroup", module + "/isolate", module + "/isolate/"},
		Reason: "the server is decode, call, encode over the contract"},
	{From: module + "/runc",
		Not:    []string{"github.com/opencontainers/runc/", "github.com/opencontainers/cgroups", "github.com/opencontainers/cgroups/", module + "/sandbox"},
		Reason: "the runc-compatible command set runs containers through isolate, not a second engine"},
	{From: module + "/sandbox",
		Not:    []string{"github.com/opencontainers/runc/", "github.com/opencontainers/cgroups", "github.com/opencontainers/cgroups/", "github.com/containerd/cgroups/"},
		Reason: "libcontainer and the cgroups libraries are used only in isolate and cgroup"},
}

// stdlibOnly are the packages whose whole dependency tree is the standard
// library: the contract, which remote callers link without cgo.
var stdlibOnly = []string{module}

// cgoFree are the packages a remote controller links: no cgo anywhere in
// their dependencies.
var cgoFree = []string{module, module + "/render", module + "/dockerargs", module + "/server/client", module + "/server/api", module + "/executor/api", module + "/executor/client"}

func matches(pattern, path string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(path, pattern)
	}
	return path == pattern
}

// layeringViolations checks pkgs against the rules and returns one line per
// violation.
func layeringViolations(pkgs []listedPackage) []string {
	byPath := map[string]listedPackage{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	var out []string
	for _, p := range pkgs {
		for _, r := range layeringRules {
			if !matches(r.From, p.ImportPath) {
				continue
			}
			for _, imp := range p.Imports {
				if slices.Contains(r.Except, imp) {
					continue
				}
				for _, not := range r.Not {
					if matches(not, imp) {
						out = append(out, fmt.Sprintf("%s imports %s: %s", p.ImportPath, imp, r.Reason))
					}
				}
			}
		}
		if slices.Contains(stdlibOnly, p.ImportPath) {
			for _, d := range p.Deps {
				if dp, ok := byPath[d]; ok && !dp.Standard {
					out = append(out, fmt.Sprintf("%s depends on %s: the contract uses the standard library only", p.ImportPath, d))
				}
			}
		}
		if slices.Contains(cgoFree, p.ImportPath) {
			for _, d := range append([]string{p.ImportPath}, p.Deps...) {
				if dp, ok := byPath[d]; ok && len(dp.CgoFiles) > 0 && !dp.Standard {
					out = append(out, fmt.Sprintf("%s depends on %s, which uses cgo: remote callers must build without it", p.ImportPath, d))
				}
			}
		}
	}
	return out
}

// listPackages runs go list over the module with the build tags of sbx.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "seccomp netgo osusergo", "-deps", "-json", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestLayering(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, v := range layeringViolations(pkgs) {
		t.Error(v)
	}
}

// TestLayeringCatchesBadImports feeds the checker a module whose CLI,
// server and sandbox import what they must not, and a contract that
// depends on a module package: each is reported.
func TestLayeringCatchesBadImports(t *testing.T) {
	bad := []listedPackage{
		{ImportPath: module + "/cmd/sbx", Imports: []string{module + "/netns", module + "/isolate", module + "/sandbox"}},
		{ImportPath: module + "/server", Imports: []string{module + "/cgroup"}},
		{ImportPath: module + "/server/client", Imports: []string{module + "/isolate/initstatus"}, Deps: []string{module + "/isolate/initstatus"}},
		{ImportPath: module + "/sandbox", Imports: []string{"github.com/opencontainers/runc/libcontainer", module + "/isolate"}},
		{ImportPath: module, Deps: []string{"fmt", module + "/internal/errkind"}},
		{ImportPath: module + "/isolate/initstatus", CgoFiles: []string{"x.go"}},
		{ImportPath: "fmt", Standard: true},
		{ImportPath: module + "/internal/errkind"},
	}
	got := strings.Join(layeringViolations(bad), "\n")
	for _, want := range []string{
		"cmd/sbx imports " + module + "/netns",
		"cmd/sbx imports " + module + "/isolate:",
		"server imports " + module + "/cgroup",
		"server/client imports " + module + "/isolate/initstatus",
		"server/client depends on " + module + "/isolate/initstatus, which uses cgo",
		"sandbox imports github.com/opencontainers/runc/libcontainer",
		module + " depends on " + module + "/internal/errkind",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("a violation was not reported: %q\ngot:\n%s", want, got)
		}
	}
	for _, allowed := range []string{"sandbox imports " + module + "/isolate"} {
		if strings.Contains(got, allowed) {
			t.Errorf("an allowed import was reported: %q", allowed)
		}
	}
}

// maxCLILines bounds cmd/sbx's non-test Go lines (issue 11): the CLI holds
// command definitions, flag wiring and calls; what a command does beyond
// that goes to a library (docs/contributing.md, "Where a command's code
// goes").
const maxCLILines = 2500

func TestCLIIsThin(t *testing.T) {
	files, err := filepath.Glob("cmd/sbx/*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(data, []byte("\n"))
	}
	if lines >= maxCLILines {
		t.Errorf("cmd/sbx has %d non-test lines (bound: under %d): move what is not command definitions, flags and calls into a library package (docs/contributing.md)", lines, maxCLILines)
	}
}

// A program linking the local backend built without cgo fails with a
// message from sbx (package internal/needcgo), not only runc's undefined
// symbols.
func TestLocalBackendWithoutCgoSaysWhy(t *testing.T) {
	cmd := exec.Command("go", "build", "-o", os.DevNull, "./sandbox")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "sbx_local_backend_needs_cgo__build_with_CGO_ENABLED_1") {
		t.Fatalf("CGO_ENABLED=0 go build ./sandbox: %v\n%s", err, out)
	}
	cmd = exec.Command("go", "build", "-o", os.DevNull, "./server/client")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the remote-only client must build without cgo: %v\n%s", err, out)
	}
}
