package workq_test

import (
	"fmt"
	"go/ast"
	"go/types"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// genPath is the sqlc-generated package; none of its types may appear in
// a public package's exported API (issue 19): a regenerated query would
// otherwise be a breaking change, and callers would import db/gen.
const genPath = "github.com/workq/workq/internal/db/gen"

// publicPackage reports whether the package at path is public API: not
// internal, not a command, not db/gen itself, not an example or a test
// harness.
func publicPackage(p *packages.Package) bool {
	path := p.PkgPath
	for _, part := range strings.Split(path, "/") {
		if part == "internal" || part == "cmd" || part == "examples" || part == "scripts" {
			return false
		}
	}
	return p.Name != "main" && path != genPath && path != "github.com/workq/workq/test" &&
		!strings.HasPrefix(path, genPath+"/")
}

// TestAPISurfaceHasNoGeneratedTypes loads every public package and fails
// naming each exported declaration (func, method, var, const, type, struct
// field, interface method, alias) whose type mentions a type of db/gen.
func TestAPISurfaceHasNoGeneratedTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Tests: false}
	pkgs, err := packages.Load(cfg, "github.com/workq/workq/...")
	if err != nil {
		t.Fatal(err)
	}
	var leaks []string
	checked := 0
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("loading %s: %v", p.PkgPath, e)
		}
		if !publicPackage(p) || p.Types == nil {
			continue
		}
		checked++
		leaks = append(leaks, typeLeaks(p.Types, isGen)...)
	}
	if checked < 10 {
		t.Fatalf("checked only %d public packages: the pattern or the filter is wrong", checked)
	}
	sort.Strings(leaks)
	for _, l := range leaks {
		t.Errorf("exported API mentions a db/gen type: %s", l)
	}
}

// isGen reports whether pkg is db/gen.
func isGen(pkg *types.Package) bool { return pkg.Path() == genPath }

// isInternal reports whether pkg is an internal package (of this module or
// another).
func isInternal(pkg *types.Package) bool {
	return slices.Contains(strings.Split(pkg.Path(), "/"), "internal")
}

// typeLeaks lists the exported declarations of pkg whose types mention a
// type of a package bad reports.
func typeLeaks(pkg *types.Package, bad func(*types.Package) bool) []string {
	var out []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Path() + "." + name
		switch o := obj.(type) {
		case *types.TypeName:
			if o.IsAlias() {
				if g := typeIn(o.Type(), false, bad); g != "" {
					out = append(out, fmt.Sprintf("%s (alias of %s)", where, g))
				}
				continue
			}
			named, ok := o.Type().(*types.Named)
			if !ok {
				continue
			}
			if g := typeIn(named.Underlying(), true, bad); g != "" {
				out = append(out, fmt.Sprintf("%s (%s)", where, g))
			}
			for i := 0; i < named.NumMethods(); i++ {
				m := named.Method(i)
				if !m.Exported() {
					continue
				}
				if g := typeIn(m.Type(), false, bad); g != "" {
					out = append(out, fmt.Sprintf("%s.%s (%s)", where, m.Name(), g))
				}
			}
		default: // *types.Func, *types.Var, *types.Const
			if g := typeIn(obj.Type(), false, bad); g != "" {
				out = append(out, fmt.Sprintf("%s (%s)", where, g))
			}
		}
	}
	return out
}

// typeIn returns the first type of a package bad reports that t mentions,
// or "". In the underlying
// type of a declared type (exportedOnly) unexported struct fields and
// interface methods are skipped: they are not API. Other named types are
// not entered (they are checked where they are declared), except their
// type arguments.
func typeIn(t types.Type, exportedOnly bool, bad func(*types.Package) bool) string {
	seen := map[types.Type]bool{}
	var walk func(t types.Type, top bool) string
	walk = func(t types.Type, top bool) string {
		if t == nil || seen[t] {
			return ""
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Alias:
			return walk(types.Unalias(t), top)
		case *types.Named:
			if obj := t.Obj(); obj.Pkg() != nil && bad(obj.Pkg()) {
				return obj.Pkg().Path() + "." + obj.Name()
			}
			if args := t.TypeArgs(); args != nil {
				for i := 0; i < args.Len(); i++ {
					if g := walk(args.At(i), false); g != "" {
						return g
					}
				}
			}
			return ""
		case *types.Pointer:
			return walk(t.Elem(), false)
		case *types.Slice:
			return walk(t.Elem(), false)
		case *types.Array:
			return walk(t.Elem(), false)
		case *types.Chan:
			return walk(t.Elem(), false)
		case *types.Map:
			if g := walk(t.Key(), false); g != "" {
				return g
			}
			return walk(t.Elem(), false)
		case *types.Signature:
			for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
				for i := 0; i < tup.Len(); i++ {
					if g := walk(tup.At(i).Type(), false); g != "" {
						return g
					}
				}
			}
			return ""
		case *types.Struct:
			for i := 0; i < t.NumFields(); i++ {
				f := t.Field(i)
				if exportedOnly && top && !f.Exported() && !f.Embedded() {
					continue
				}
				if g := walk(f.Type(), false); g != "" {
					return fmt.Sprintf("field %s: %s", f.Name(), g)
				}
			}
			return ""
		case *types.Interface:
			for i := 0; i < t.NumEmbeddeds(); i++ {
				if g := walk(t.EmbeddedType(i), false); g != "" {
					return g
				}
			}
			for i := 0; i < t.NumExplicitMethods(); i++ {
				m := t.ExplicitMethod(i)
				if exportedOnly && top && !m.Exported() {
					continue
				}
				if g := walk(m.Type(), false); g != "" {
					return fmt.Sprintf("method %s: %s", m.Name(), g)
				}
			}
			return ""
		case *types.Union:
			for i := 0; i < t.Len(); i++ {
				if g := walk(t.Term(i).Type(), false); g != "" {
					return g
				}
			}
			return ""
		case *types.TypeParam:
			return walk(t.Constraint(), false)
		}
		return ""
	}
	return walk(t, true)
}

// TestAPISurfaceHasNoInternal fails naming each exported declaration of a
// public package that go doc would show referring to an internal package:
// a type that mentions one of its types, or a declaration whose text
// names one (ErrX = internalpkg.ErrY, C T = internalpkg.C, type T
// internalpkg.U). A user can neither name nor import what it refers to.
func TestAPISurfaceHasNoInternal(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, "github.com/workq/workq/...")
	if err != nil {
		t.Fatal(err)
	}
	var leaks []string
	checked := 0
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("loading %s: %v", p.PkgPath, e)
		}
		if !publicPackage(p) || p.Types == nil {
			continue
		}
		checked++
		leaks = append(leaks, typeLeaks(p.Types, isInternal)...)
		leaks = append(leaks, syntaxLeaks(p)...)
	}
	if checked < 10 {
		t.Fatalf("checked only %d public packages: the pattern or the filter is wrong", checked)
	}
	sort.Strings(leaks)
	for _, l := range slices.Compact(leaks) {
		t.Errorf("exported API refers to an internal package: %s", l)
	}
}

// syntaxLeaks lists the exported package-level constants, variables and
// types of p whose declaration (type and value, as go doc prints it; a
// struct's unexported fields left out) names something of an internal
// package.
func syntaxLeaks(p *packages.Package) []string {
	var out []string
	refers := func(where string, nodes ...ast.Node) {
		for _, n := range nodes {
			if n == nil || reflect.ValueOf(n).IsNil() {
				continue
			}
			ast.Inspect(n, func(n ast.Node) bool {
				if f, ok := n.(*ast.Field); ok && len(f.Names) > 0 && !slices.ContainsFunc(f.Names, (*ast.Ident).IsExported) {
					return false // an unexported field or method: not shown
				}
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				if obj := p.TypesInfo.Uses[id]; obj != nil && obj.Pkg() != nil && isInternal(obj.Pkg()) {
					out = append(out, fmt.Sprintf("%s (%s.%s)", where, obj.Pkg().Path(), obj.Name()))
				}
				return true
			})
		}
	}
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for i, name := range s.Names {
						if !name.IsExported() {
							continue
						}
						where := p.PkgPath + "." + name.Name
						refers(where, s.Type)
						if i < len(s.Values) {
							refers(where, s.Values[i])
						}
					}
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						refers(p.PkgPath+"."+s.Name.Name, s.TypeParams, s.Type)
					}
				}
			}
		}
	}
	return out
}

// publicPackages is the public API's package list (design.md §28): the
// root and the packages a user imports beside it. A new public package is a
// decision, recorded there, not an accident of where code was put.
var publicPackages = []string{
	"github.com/workq/workq",
	"github.com/workq/workq/api",
	"github.com/workq/workq/db/migrations",
	"github.com/workq/workq/inbox",
	"github.com/workq/workq/migrate",
	"github.com/workq/workq/outbox",
	"github.com/workq/workq/publish",
	"github.com/workq/workq/timers",
	"github.com/workq/workq/workqtest",
	"github.com/workq/workq/workqtype",
}

// TestPublicPackages fails when the module's public packages (not
// internal, not a command, an example or a test harness) are not exactly
// publicPackages: at most ten, each one chosen.
func TestPublicPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the module")
	}
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName}, "github.com/workq/workq/...")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pkgs {
		if publicPackage(p) {
			got = append(got, p.PkgPath)
		}
	}
	sort.Strings(got)
	if !slices.Equal(got, publicPackages) {
		t.Errorf("public packages:\n got  %q\n want %q", got, publicPackages)
	}
	if len(publicPackages) > 10 {
		t.Errorf("%d public packages; at most ten (design.md §28)", len(publicPackages))
	}
}
