package workq_test

import (
	"fmt"
	"go/types"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// genPath is the sqlc-generated package; none of its types may appear in
// a public package's exported API (issue 19): a regenerated query would
// otherwise be a breaking change, and callers would import db/gen.
const genPath = "github.com/workq/workq/db/gen"

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
		leaks = append(leaks, genLeaks(p.Types)...)
	}
	if checked < 10 {
		t.Fatalf("checked only %d public packages: the pattern or the filter is wrong", checked)
	}
	sort.Strings(leaks)
	for _, l := range leaks {
		t.Errorf("exported API mentions a db/gen type: %s", l)
	}
}

// genLeaks lists the exported declarations of pkg whose types mention a
// type from db/gen.
func genLeaks(pkg *types.Package) []string {
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
				if g := genIn(o.Type(), false); g != "" {
					out = append(out, fmt.Sprintf("%s (alias of %s)", where, g))
				}
				continue
			}
			named, ok := o.Type().(*types.Named)
			if !ok {
				continue
			}
			if g := genIn(named.Underlying(), true); g != "" {
				out = append(out, fmt.Sprintf("%s (%s)", where, g))
			}
			for i := 0; i < named.NumMethods(); i++ {
				m := named.Method(i)
				if !m.Exported() {
					continue
				}
				if g := genIn(m.Type(), false); g != "" {
					out = append(out, fmt.Sprintf("%s.%s (%s)", where, m.Name(), g))
				}
			}
		default: // *types.Func, *types.Var, *types.Const
			if g := genIn(obj.Type(), false); g != "" {
				out = append(out, fmt.Sprintf("%s (%s)", where, g))
			}
		}
	}
	return out
}

// genIn returns the first db/gen type t mentions, or "". In the underlying
// type of a declared type (exportedOnly) unexported struct fields and
// interface methods are skipped: they are not API. Other named types are
// not entered (they are checked where they are declared), except their
// type arguments.
func genIn(t types.Type, exportedOnly bool) string {
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
			if obj := t.Obj(); obj.Pkg() != nil && obj.Pkg().Path() == genPath {
				return "gen." + obj.Name()
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
