package workq_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestDocSnippetsCompile builds every ```go block of README.md and
// docs/*.md with `go build` and `go vet`, in a module of its own that
// requires this one through a replace directive, and fails naming the
// document and line of each error. The conventions a block follows are in
// docs/development.md (Go in the docs):
//
//   - A block that starts with a package clause is a whole file, built as
//     a package of its own.
//   - Any other block is a fragment. The fragments of one document form one
//     package, so a type one block declares is known to the blocks after it.
//     Top-level declarations (lines from column 1 starting with import,
//     type, func, const or var) are kept as they are; the other lines are
//     statements, which go into a function of their own (func() error, so
//     `return err` works), where ctx, pool, tx, client and workers are
//     declared (see snippetHelpers) and a variable declared and not used is
//     no error. A fragment may import packages itself; the common ones
//     (snippetImports) are imported for it when it uses them.
//   - An HTML comment `<!-- go: ... -->` right before a block holds
//     declarations the block assumes and does not show (a type of the
//     reader's, a function body), compiled with it.
//   - README.md shows examples/quickstart/main.go: each of its blocks must
//     be a part of that file, which TestQuickstart builds and runs.
//   - ```go notest marks a block that is deliberately not compiled; the
//     test lists them, and there should be none.
func TestDocSnippetsCompile(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"README.md"}, files...)

	dir := t.TempDir()
	writeSnippetModule(t, dir, root)
	var notest []string
	built, pkgs := 0, 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks := snippetBlocks(f, string(src))
		if f == "README.md" {
			main, err := os.ReadFile("examples/quickstart/main.go")
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range blocks {
				if !strings.Contains(string(main), b.code) {
					t.Errorf("%s:%d: the block is not a part of examples/quickstart/main.go, which README.md shows", f, b.line)
				}
				built++
			}
			continue
		}
		var frags []snippetBlock
		for _, b := range blocks {
			switch {
			case b.notest:
				notest = append(notest, fmt.Sprintf("%s:%d", f, b.line))
			case b.whole:
				pkgs++
				writeFile(t, filepath.Join(dir, fmt.Sprintf("whole%d", pkgs), "main.go"),
					fmt.Sprintf("//line %s:%d\n%s", filepath.Join(root, f), b.line, b.code))
				built++
			default:
				frags = append(frags, b)
			}
		}
		if len(frags) == 0 {
			continue
		}
		pkgs++
		pkgDir := filepath.Join(dir, fmt.Sprintf("frag%d", pkgs))
		writeFile(t, filepath.Join(pkgDir, "helpers.go"), snippetHelpers)
		for i, b := range frags {
			code, err := fragmentFile(filepath.Join(root, f), b)
			if err != nil {
				t.Errorf("%s:%d: %v", f, b.line, err)
				continue
			}
			writeFile(t, filepath.Join(pkgDir, fmt.Sprintf("block%d.go", i+1)), code)
			built++
		}
	}
	if built < 20 {
		t.Fatalf("only %d Go blocks found: the Markdown scan is wrong", built)
	}
	for _, n := range notest {
		t.Logf("not compiled (```go notest): %s", n)
	}
	if len(notest) > 0 {
		t.Errorf("%d blocks are marked notest: %v; make them compile", len(notest), notest)
	}
	for _, args := range [][]string{{"build", "-gcflags=-e", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			msg := strings.ReplaceAll(string(out), root+string(filepath.Separator), "")
			t.Fatalf("go %s of the docs' Go blocks failed (%v); fix the blocks at these lines:\n%s", strings.Join(args, " "), err, msg)
		}
	}
}

// snippetImports are the packages a fragment may use without importing
// them: name and path.
var snippetImports = [][2]string{
	{"context", "context"}, {"errors", "errors"}, {"fmt", "fmt"}, {"io", "io"}, {"log", "log"},
	{"slog", "log/slog"}, {"os", "os"}, {"signal", "os/signal"}, {"syscall", "syscall"},
	{"strings", "strings"}, {"time", "time"}, {"json", "encoding/json"}, {"http", "net/http"},
	{"testing", "testing"},
	{"pgx", "github.com/jackc/pgx/v5"}, {"pgxpool", "github.com/jackc/pgx/v5/pgxpool"},
	{"nats", "github.com/nats-io/nats.go"}, {"jetstream", "github.com/nats-io/nats.go/jetstream"},
	{"promhttp", "github.com/prometheus/client_golang/prometheus/promhttp"},
	{"workq", "github.com/workq/workq"}, {"admin", "github.com/workq/workq/internal/admin"},
	{"api", "github.com/workq/workq/api"}, {"inbox", "github.com/workq/workq/inbox"},
	{"lease", "github.com/workq/workq/internal/lease"}, {"migrate", "github.com/workq/workq/migrate"},
	{"outbox", "github.com/workq/workq/outbox"}, {"publish", "github.com/workq/workq/publish"},
	{"schedule", "github.com/workq/workq/internal/schedule"}, {"shardlimit", "github.com/workq/workq/internal/shardlimit"},
	{"timers", "github.com/workq/workq/timers"}, {"worker", "github.com/workq/workq/internal/worker"},
	{"workqtest", "github.com/workq/workq/workqtest"},
}

// snippetHelpers declares what every fragment's statements may use.
const snippetHelpers = `package snippets

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
)

var (
	ctx     = context.Background()
	pool    *pgxpool.Pool
	tx      pgx.Tx
	client  *workq.Client
	workers = workq.NewWorkers()
)
`

// snippetBlock is one ```go block of a document.
type snippetBlock struct {
	line        int    // the document's line of the block's first code line
	code        string // the block, with a final newline
	assumed     string // the declarations of a <!-- go: --> comment before it
	assumedLine int
	whole       bool // starts with a package clause
	notest      bool // ```go notest
}

var assumeRE = regexp.MustCompile(`(?s)<!--\s*go:\s*\n(.*?)-->\s*$`)

// snippetBlocks returns the ```go blocks of a Markdown document.
func snippetBlocks(name, md string) []snippetBlock {
	var blocks []snippetBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		info := strings.TrimSpace(lines[i])
		if info != "```go" && info != "```go notest" {
			continue
		}
		b := snippetBlock{line: i + 2, notest: info == "```go notest"}
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
		}
		b.code = strings.Join(lines[i+1:j], "\n") + "\n"
		before := strings.Join(lines[:i], "\n")
		at := max(strings.LastIndex(before, "<!--"), 0)
		if m := assumeRE.FindStringSubmatchIndex(before[at:]); m != nil {
			b.assumed = before[at+m[2] : at+m[3]]
			b.assumedLine = strings.Count(before[:at+m[2]], "\n") + 1
		}
		for _, l := range strings.Split(b.code, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "//") {
				continue
			}
			b.whole = strings.HasPrefix(l, "package ")
			break
		}
		blocks = append(blocks, b)
		i = j
	}
	return blocks
}

// fragmentFile turns a fragment into a Go file of package snippets: its
// declarations at the top level, its statements in a func() error, each
// part under a //line directive naming its place in doc.
func fragmentFile(doc string, b snippetBlock) (string, error) {
	decl, err := declLines(b.code)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSuffix(b.code, "\n"), "\n")
	var top, body strings.Builder
	if b.assumed != "" {
		fmt.Fprintf(&top, "//line %s:%d\n%s\n", doc, b.assumedLine, b.assumed)
	}
	var imports []string // the fragment's own import declarations
	prev := -1           // the kind of the last line written: 0 statement, 1 declaration
	for i, l := range lines {
		kind := 0
		if decl[i] {
			kind = 1
		}
		if kind == 0 && strings.TrimSpace(l) == "" {
			prev = -1 // a blank line: the next one gets a directive
			continue
		}
		w := &body
		if kind == 1 {
			w = &top
		}
		if kind != prev {
			fmt.Fprintf(w, "\n//line %s:%d\n", doc, b.line+i)
		}
		prev = kind
		fmt.Fprintln(w, l)
	}
	src := "package snippets\n\n" + top.String() + "\nfunc _() error {\n" + body.String() + "\treturn nil\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution|parser.ParseComments)
	if err != nil {
		return "", fmt.Errorf("the block does not parse (as declarations and statements): %w", err)
	}
	for _, im := range f.Imports {
		imports = append(imports, im.Path.Value)
	}
	// Variables declared and not used are no error in a fragment: after
	// each statement that declares some, on its line, use them.
	type edit struct {
		at   int
		text string
	}
	var edits []edit
	fn := f.Decls[len(f.Decls)-1].(*ast.FuncDecl)
	list := fn.Body.List
	if n := len(list); n >= 2 && terminates(list[n-2]) {
		ret := list[n-1]
		edits = append(edits, edit{fset.Position(ret.Pos()).Offset, "//"}) // "return nil" would be unreachable
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		var stmts []ast.Stmt
		switch n := n.(type) {
		case *ast.BlockStmt:
			stmts = n.List
		case *ast.CaseClause:
			stmts = n.Body
		case *ast.CommClause:
			stmts = n.Body
		}
		for _, s := range stmts {
			var names []string
			switch s := s.(type) {
			case *ast.AssignStmt:
				if s.Tok == token.DEFINE {
					for _, e := range s.Lhs {
						if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
							names = append(names, id.Name)
						}
					}
				}
			case *ast.DeclStmt:
				if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, sp := range g.Specs {
						for _, id := range sp.(*ast.ValueSpec).Names {
							if id.Name != "_" {
								names = append(names, id.Name)
							}
						}
					}
				}
			}
			for _, name := range names {
				edits = append(edits, edit{fset.Position(s.End()).Offset, "; _ = " + name})
			}
		}
		return true
	})
	// The common packages the fragment uses and does not import itself.
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	var add []string
	for _, im := range snippetImports {
		if used[im[0]] && !slices.Contains(imports, `"`+im[1]+`"`) && !importsName(f, im[0]) {
			add = append(add, fmt.Sprintf("%s %q", im[0], im[1]))
		}
	}
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].at > edits[j].at })
	out := []byte(src)
	for _, e := range edits {
		out = slices.Insert(out, e.at, []byte(e.text)...)
	}
	head := "package snippets\n"
	if len(add) > 0 {
		head += "\nimport (\n\t" + strings.Join(add, "\n\t") + "\n)\n"
	}
	return head + string(bytes.TrimPrefix(out, []byte("package snippets\n"))), nil
}

// importsName reports whether f imports a package under name.
func importsName(f *ast.File, name string) bool {
	for _, im := range f.Imports {
		p := strings.Trim(im.Path.Value, `"`)
		if (im.Name != nil && im.Name.Name == name) || (im.Name == nil && (filepath.Base(p) == name || strings.HasSuffix(p, "/"+name+"/v5"))) {
			return true
		}
	}
	return false
}

// terminates reports whether s ends its function (a return or a panic).
func terminates(s ast.Stmt) bool {
	switch s := s.(type) {
	case *ast.ReturnStmt:
		return true
	case *ast.ExprStmt:
		if c, ok := s.X.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "panic" {
				return true
			}
		}
	}
	return false
}

// declLines marks the lines of code that belong to a top-level
// declaration: from a line that starts in column 1 with import, type,
// const, var or func (a function or method, not a function literal) to the
// end of that declaration.
func declLines(code string) ([]bool, error) {
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(code))
	var s scanner.Scanner
	var errs scanner.ErrorList
	s.Init(file, []byte(code), func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	type tok struct {
		pos token.Position
		tok token.Token
		lit string
	}
	var toks []tok
	for {
		pos, t, lit := s.Scan()
		if t == token.EOF {
			break
		}
		toks = append(toks, tok{fset.Position(pos), t, lit})
	}
	if errs.Len() > 0 {
		return nil, errs.Err()
	}
	decl := make([]bool, strings.Count(code, "\n")+1)
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		start := depth == 0 && t.pos.Column == 1
		switch t.tok {
		case token.IMPORT, token.TYPE, token.CONST, token.VAR:
		case token.FUNC:
			start = start && i+1 < len(toks) && isFuncDecl(toks[i+1:], func(k int) token.Token { return toks[i+1+k].tok })
		default:
			start = false
		}
		if !start {
			depth += delta(t.tok)
			continue
		}
		first := t.pos.Line
		for ; i < len(toks); i++ {
			depth += delta(toks[i].tok)
			if depth == 0 && toks[i].tok == token.SEMICOLON {
				break
			}
		}
		last := len(decl)
		if i < len(toks) {
			last = toks[i].pos.Line
		}
		for l := first; l <= last && l <= len(decl); l++ {
			decl[l-1] = true
		}
	}
	return decl, nil
}

// isFuncDecl reports whether the tokens after a func keyword make a
// function or method declaration: a name, or a receiver followed by a name
// and a parameter list.
func isFuncDecl[T any](rest []T, at func(int) token.Token) bool {
	if at(0) == token.IDENT {
		return true
	}
	if at(0) != token.LPAREN {
		return false
	}
	depth := 0
	for k := range rest {
		depth += delta(at(k))
		if depth == 0 {
			return k+2 < len(rest) && at(k+1) == token.IDENT && (at(k+2) == token.LPAREN || at(k+2) == token.LBRACK)
		}
	}
	return false
}

func delta(t token.Token) int {
	switch t {
	case token.LPAREN, token.LBRACE, token.LBRACK:
		return 1
	case token.RPAREN, token.RBRACE, token.RBRACK:
		return -1
	}
	return 0
}

// writeSnippetModule writes dir/go.mod (this module's requirements, and this
// module itself through a replace directive to root) and go.sum.
func writeSnippetModule(t *testing.T, dir, root string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	const self = "module github.com/workq/workq\n"
	if !bytes.HasPrefix(mod, []byte(self)) {
		t.Fatalf("go.mod does not start with %q", self)
	}
	gomod := "module workqdocsnippets\n" + string(mod[len(self):]) +
		"\nrequire github.com/workq/workq v0.0.0\n\nreplace github.com/workq/workq => " + root + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), gomod)
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDeclLines: which lines of a fragment are top-level declarations.
func TestDeclLines(t *testing.T) {
	for _, c := range []struct {
		name, code string
		want       []bool // per line; the last is the empty line after the final newline
	}{
		{"statements", "x := 1\nfmt.Println(x)\n", []bool{false, false, false}},
		{"a type and a method", "type A struct {\n\tN int\n}\n\nfunc (A) Kind() string { return \"a\" }\n", []bool{true, true, true, false, true, false}},
		{"a function literal statement is no declaration", "func() {\n}()\n", []bool{false, false, false}},
		{"a function after statements", "x := 1\nfunc f(n int) int {\n\treturn n\n}\n", []bool{false, true, true, true, false}},
		{"indented var is a statement", "if ok {\n\tvar y int\n}\n", []bool{false, false, false, false}},
		{"an import block", "import (\n\t\"fmt\"\n)\nfmt.Println()\n", []bool{true, true, true, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := declLines(c.code)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("declLines = %v, want %v", got, c.want)
			}
		})
	}
}
