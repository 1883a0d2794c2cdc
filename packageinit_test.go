package sbx_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Every sbx program (the CLI, the executor inside each sandbox, the
// server) runs the package initialisation of everything it links before
// its first instruction, on every start. A pattern compiled into a
// package-level variable is paid there by programs that never use it;
// compiled on first use (sync.OnceValue) it costs only its users.

// initRegexps lists the package-level variables of src whose value
// compiles a regular expression at package initialisation.
func initRegexps(fset *token.FileSet, filename string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, filename, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.VAR {
			continue
		}
		for _, spec := range gen.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				call, ok := v.(*ast.CallExpr)
				if !ok {
					continue
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "regexp" && strings.HasSuffix(sel.Sel.Name, "Compile") {
					found = append(found, fset.Position(v.Pos()).String())
				}
			}
		}
	}
	return found, nil
}

func TestNoRegexpCompiledAtProgramStart(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range listPackages(t) {
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		for _, name := range p.GoFiles {
			found, err := initRegexps(fset, filepath.Join(p.Dir, name), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, pos := range found {
				t.Errorf("%s: a package-level regexp is compiled at the start of every program that links %s; compile it on first use (sync.OnceValue)", pos, p.ImportPath)
			}
		}
	}
}

func TestNoRegexpCompiledAtProgramStartCatchesOne(t *testing.T) {
	src := `package p
import ("regexp"; "sync")
var a = regexp.MustCompile("x")
var b, c = 1, regexp.Compile("y")
var d = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("z") })
func f() { e := regexp.MustCompile("w"); _ = e }
`
	found, err := initRegexps(token.NewFileSet(), "p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || !strings.HasPrefix(found[0], "p.go:3:") || !strings.HasPrefix(found[1], "p.go:4:") {
		t.Errorf("found %q, want the variables of lines 3 and 4", found)
	}
}
