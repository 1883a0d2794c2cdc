package sbx_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
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
		Except: []string{module + "/isolate", module + "/isolate/reaper"},
		Reason: "the CLI reaches the host through sandbox.Host; isolate (only isolate.Init) and isolate/reaper are its re-exec entry points"},
	{From: module + "/server/", Not: []string{module + "/netns", module + "/cgroup", module + "/isolate", module + "/isolate/"},
		Reason: "the server is decode, call, encode over the contract"},
	{From: module + "/server", Not: []string{module + "/netns", module + "/cgroup", module + "/isolate", module + "/isolate/"},
		Reason: "the server is decode, call, encode over the contract"},
	{From: module + "/sandbox",
		Not:    []string{"github.com/opencontainers/runc/", "github.com/opencontainers/cgroups", "github.com/opencontainers/cgroups/", "github.com/containerd/cgroups/"},
		Reason: "libcontainer and the cgroups libraries are used only in isolate and cgroup"},
}

// stdlibOnly are the packages whose whole dependency tree is the standard
// library: the contract, which remote callers link without cgo.
var stdlibOnly = []string{module}

// cgoFree are the packages a remote controller links: no cgo anywhere in
// their dependencies.
var cgoFree = []string{module, module + "/server/client", module + "/server/api", module + "/executor/api", module + "/executor/client"}

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
	// cmd/sbx may import isolate only for its re-exec entry point.
	for _, p := range pkgs {
		if p.ImportPath == module+"/cmd/sbx" {
			for _, use := range isolateUses(t, p) {
				if use != "Init" {
					t.Errorf("cmd/sbx uses isolate.%s; only isolate.Init (the re-exec entry point) is allowed", use)
				}
			}
		}
	}
}

// isolateUses returns the names cmd/sbx's files use from package isolate.
func isolateUses(t *testing.T, p listedPackage) []string {
	t.Helper()
	var uses []string
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"`+module+`/isolate"` {
				local = "isolate"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
					uses = append(uses, sel.Sel.Name)
				}
			}
			return true
		})
	}
	return uses
}

// TestLayeringCatchesBadImports feeds the checker a module whose CLI,
// server and sandbox import what they must not, and a contract that
// depends on a module package: each is reported.
func TestLayeringCatchesBadImports(t *testing.T) {
	bad := []listedPackage{
		{ImportPath: module + "/cmd/sbx", Imports: []string{module + "/netns", module + "/isolate", module + "/sandbox"}},
		{ImportPath: module + "/server", Imports: []string{module + "/cgroup"}},
		{ImportPath: module + "/server/client", Imports: []string{module + "/isolate/reaper"}, Deps: []string{module + "/isolate/reaper"}},
		{ImportPath: module + "/sandbox", Imports: []string{"github.com/opencontainers/runc/libcontainer", module + "/isolate"}},
		{ImportPath: module, Deps: []string{"fmt", module + "/internal/errkind"}},
		{ImportPath: module + "/isolate/reaper", CgoFiles: []string{"x.go"}},
		{ImportPath: "fmt", Standard: true},
		{ImportPath: module + "/internal/errkind"},
	}
	got := strings.Join(layeringViolations(bad), "\n")
	for _, want := range []string{
		"cmd/sbx imports " + module + "/netns",
		"server imports " + module + "/cgroup",
		"server/client imports " + module + "/isolate/reaper",
		"server/client depends on " + module + "/isolate/reaper, which uses cgo",
		"sandbox imports github.com/opencontainers/runc/libcontainer",
		module + " depends on " + module + "/internal/errkind",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("a violation was not reported: %q\ngot:\n%s", want, got)
		}
	}
	for _, allowed := range []string{"cmd/sbx imports " + module + "/isolate:", "sandbox imports " + module + "/isolate"} {
		if strings.Contains(got, allowed) {
			t.Errorf("an allowed import was reported: %q", allowed)
		}
	}
}
