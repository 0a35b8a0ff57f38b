package workq_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"

	"github.com/workq/workq/internal/db"
)

// markdownFiles are the documents whose links are checked.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.md", "docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	if len(files) < 3 {
		t.Fatalf("found only %v: run the test from the module root", files)
	}
	return files
}

// mdDoc is what the link check needs of one Markdown file.
type mdDoc struct {
	anchors map[string]bool // GitHub's heading anchors
	links   []string        // link and image destinations, in order
}

func parseMarkdown(t *testing.T, path string) mdDoc {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(src))
	doc := mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	err = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			slug := githubSlug(plainText(n, src))
			// GitHub numbers repeated headings: x, x-1, x-2, ...
			if k := seen[slug]; k > 0 {
				doc.anchors[slug+"-"+strconv.Itoa(k)] = true
			} else {
				doc.anchors[slug] = true
			}
			seen[slug]++
		case *ast.Link:
			doc.links = append(doc.links, string(n.Destination))
		case *ast.Image:
			doc.links = append(doc.links, string(n.Destination))
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// plainText is the text a heading renders to: code spans, emphasis and link
// texts without their markup.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			switch c := c.(type) {
			case *ast.Text:
				b.Write(c.Segment.Value(src))
			case *ast.String:
				b.Write(c.Value)
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// githubSlug is the anchor GitHub gives a heading: lower case, every
// character but letters, digits, '-' and '_' dropped, each space a '-'.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Scenario 4: PgBouncer", "scenario-4-pgbouncer"},
		{"Tools, and why these", "tools-and-why-these"},
		{"Exactly once — the argument", "exactly-once--the-argument"},
		{"6.1b The outbox claim (OutboxClaim)", "61b-the-outbox-claim-outboxclaim"},
		{"The demo: workq run", "the-demo-workq-run"},
		{"outbox_joins and key_in_flight", "outbox_joins-and-key_in_flight"},
	} {
		if got := githubSlug(tc.heading); got != tc.want {
			t.Errorf("githubSlug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// TestDocLinks: every relative link and image in the Markdown files points at
// a file or directory that exists, and every #anchor at a heading of its
// target (by GitHub's anchor rules).
func TestDocLinks(t *testing.T) {
	files := markdownFiles(t)
	docs := map[string]mdDoc{}
	for _, f := range files {
		docs[filepath.Clean(f)] = parseMarkdown(t, f)
	}
	checked := 0
	for _, f := range files {
		for _, link := range docs[filepath.Clean(f)].links {
			if err := checkLink(f, link, docs); err != nil {
				t.Errorf("%s: link %q: %v", f, link, err)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the Markdown parse found nothing to check")
	}
}

func checkLink(from, link string, docs map[string]mdDoc) error {
	u, err := url.Parse(link)
	if err != nil {
		return err
	}
	if u.Scheme != "" || u.Host != "" {
		return nil // external
	}
	target := filepath.Clean(from)
	if u.Path != "" {
		target = filepath.Join(filepath.Dir(from), u.Path)
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("no such file or directory %s", target)
		}
	}
	if u.Fragment == "" {
		return nil
	}
	doc, ok := docs[target]
	if !ok {
		if !strings.HasSuffix(target, ".md") {
			return fmt.Errorf("an anchor into %s, which is not Markdown", target)
		}
		return fmt.Errorf("an anchor into %s, which the check does not read (add it to markdownFiles)", target)
	}
	if !doc.anchors[u.Fragment] {
		return fmt.Errorf("%s has no heading with anchor #%s", target, u.Fragment)
	}
	return nil
}

// TestDocsIndexListsEveryDoc: docs/README.md links every document in docs/.
func TestDocsIndexListsEveryDoc(t *testing.T) {
	index := parseMarkdown(t, "docs/README.md")
	linked := map[string]bool{}
	for _, l := range index.links {
		if u, err := url.Parse(l); err == nil && u.Scheme == "" {
			linked[filepath.Clean(u.Path)] = true
		}
	}
	all, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if name := filepath.Base(f); name != "README.md" && !linked[name] {
			t.Errorf("docs/README.md does not list %s: add a line for it", f)
		}
	}
}

// TestDocsSchemaVersion: a doc that quotes workq's "schema at version N"
// line quotes the newest migration.
func TestDocsSchemaVersion(t *testing.T) {
	re := regexp.MustCompile(`schema at version (\d+)`)
	want := strconv.FormatInt(db.LatestVersion(), 10)
	found := false
	for _, f := range markdownFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			found = true
			if m[1] != want {
				t.Errorf("%s says %q; the newest migration is %s", f, m[0], want)
			}
		}
	}
	if !found {
		t.Fatal(`no doc quotes "schema at version N" any more: drop this test or the quote's check`)
	}
}
