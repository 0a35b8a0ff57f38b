package rundir_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/rundir"
)

const secret = "outside the runs directory"

// layout is a runs directory with one attempt (t/1/run/attempt.log and
// meta.json, made by this package) and, next to it, a directory outside
// holding a secret file and a fake attempt tree.
type layout struct {
	runs, outside, secretFile string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	base := t.TempDir()
	l := layout{runs: filepath.Join(base, "runs"), outside: filepath.Join(base, "outside")}
	l.secretFile = filepath.Join(l.outside, "secret")
	mkdir(t, filepath.Join(l.outside, "t", "1", "run"))
	for _, p := range []string{l.secretFile, filepath.Join(l.outside, "t", "1", "run", "attempt.log"), filepath.Join(l.outside, "run", "attempt.log")} {
		mkdir(t, filepath.Dir(p))
		write(t, p, secret)
	}
	root, err := rundir.Open(l.runs, true)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	run, err := rundir.Dir(root, true, "t", "1", "run")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	f, err := rundir.OpenFile(run, "attempt.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("the handler's log\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := rundir.WriteFile(run, "meta.json", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l layout) path(rel string) string { return filepath.Join(l.runs, filepath.FromSlash(rel)) }

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replaceWithLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.RemoveAll(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// readLog reads t/1/run/attempt.log as the API does.
func readLog(dir string) (string, error) {
	root, err := rundir.Open(dir, false)
	if err != nil {
		return "", err
	}
	defer root.Close()
	run, err := rundir.Dir(root, false, "t", "1", "run")
	if err != nil {
		return "", err
	}
	defer run.Close()
	f, err := rundir.OpenFile(run, "attempt.log", os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

// TestReadRefusesLinks: every shape of link (and FIFO, hard link) put in
// the runs directory is refused, whether it points outside or inside.
func TestReadRefusesLinks(t *testing.T) {
	cases := []struct {
		name  string
		plant func(t *testing.T, l layout)
	}{
		{"attempt.log a link to a file outside", func(t *testing.T, l layout) {
			replaceWithLink(t, l.secretFile, l.path("t/1/run/attempt.log"))
		}},
		{"attempt.log a link to /etc/passwd", func(t *testing.T, l layout) {
			replaceWithLink(t, "/etc/passwd", l.path("t/1/run/attempt.log"))
		}},
		{"attempt.log a link to /proc/self/environ", func(t *testing.T, l layout) {
			replaceWithLink(t, "/proc/self/environ", l.path("t/1/run/attempt.log"))
		}},
		{"attempt.log a relative link climbing out", func(t *testing.T, l layout) {
			replaceWithLink(t, "../../../../outside/secret", l.path("t/1/run/attempt.log"))
		}},
		{"run directory a link to a directory outside", func(t *testing.T, l layout) {
			replaceWithLink(t, filepath.Join(l.outside, "run"), l.path("t/1/run"))
		}},
		{"item directory a link outside", func(t *testing.T, l layout) {
			replaceWithLink(t, filepath.Join(l.outside, "t", "1"), l.path("t/1"))
		}},
		{"table directory a link outside", func(t *testing.T, l layout) {
			replaceWithLink(t, filepath.Join(l.outside, "t"), l.path("t"))
		}},
		{"attempt.log a link inside the runs directory", func(t *testing.T, l layout) {
			write(t, l.path("t/1/other"), secret)
			replaceWithLink(t, "../other", l.path("t/1/run/attempt.log"))
		}},
		{"run directory a link inside the runs directory", func(t *testing.T, l layout) {
			mkdir(t, l.path("t/2/run"))
			write(t, l.path("t/2/run/attempt.log"), secret)
			replaceWithLink(t, "../2/run", l.path("t/1/run"))
		}},
		{"attempt.log a hard link to a file outside", func(t *testing.T, l layout) {
			if err := os.Remove(l.path("t/1/run/attempt.log")); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(l.secretFile, l.path("t/1/run/attempt.log")); err != nil {
				t.Fatal(err)
			}
		}},
		{"attempt.log a FIFO", func(t *testing.T, l layout) {
			if err := os.Remove(l.path("t/1/run/attempt.log")); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(l.path("t/1/run/attempt.log"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"attempt.log a directory", func(t *testing.T, l layout) {
			if err := os.Remove(l.path("t/1/run/attempt.log")); err != nil {
				t.Fatal(err)
			}
			mkdir(t, l.path("t/1/run/attempt.log"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLayout(t)
			if got, err := readLog(l.runs); err != nil || got != "the handler's log\n" {
				t.Fatalf("before: %q, %v", got, err)
			}
			c.plant(t, l)
			type result struct {
				got string
				err error
			}
			done := make(chan result, 1)
			go func() { got, err := readLog(l.runs); done <- result{got, err} }()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("reading the log blocked")
			}
			if !errors.Is(r.err, rundir.ErrRefused) {
				t.Errorf("err %v, want ErrRefused", r.err)
			}
			if r.got != "" {
				t.Errorf("read %q through the planted file", r.got)
			}
		})
	}
}

// TestRunsDirItselfMayBeALink: the configured directory is resolved once.
func TestRunsDirItselfMayBeALink(t *testing.T) {
	l := newLayout(t)
	link := filepath.Join(t.TempDir(), "runs-link")
	if err := os.Symlink(l.runs, link); err != nil {
		t.Fatal(err)
	}
	if got, err := readLog(link); err != nil || got != "the handler's log\n" {
		t.Fatalf("through a linked runs dir: %q, %v", got, err)
	}
}

// TestWritesStayInside: what the worker writes never goes through a link,
// and what it makes is 0700/0600.
func TestWritesStayInside(t *testing.T) {
	modes := func(t *testing.T, l layout) {
		t.Helper()
		for rel, want := range map[string]os.FileMode{"": rundir.DirMode, "t": rundir.DirMode, "t/1": rundir.DirMode, "t/1/run": rundir.DirMode,
			"t/1/run/attempt.log": rundir.FileMode, "t/1/run/meta.json": rundir.FileMode} {
			fi, err := os.Lstat(l.path(rel))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s: mode %v, want %v", rel, got, want)
			}
		}
	}
	t.Run("modes", func(t *testing.T) {
		old := syscall.Umask(0) // the modes asked for, not the umask's
		defer syscall.Umask(old)
		modes(t, newLayout(t))
	})

	open := func(l layout, elems ...string) (*os.Root, error) {
		root, err := rundir.Open(l.runs, false)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		return rundir.Dir(root, true, elems...)
	}
	unchanged := func(t *testing.T, l layout) {
		t.Helper()
		for _, p := range []string{l.secretFile, filepath.Join(l.outside, "t", "1", "run", "attempt.log"), filepath.Join(l.outside, "run", "attempt.log")} {
			b, err := os.ReadFile(p)
			if err != nil || string(b) != secret {
				t.Errorf("%s outside was changed: %q, %v", p, b, err)
			}
		}
		var extra []string
		_ = filepath.WalkDir(l.outside, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(p, "secret") && !strings.HasSuffix(p, "attempt.log") {
				extra = append(extra, p)
			}
			return err
		})
		if len(extra) > 0 {
			t.Errorf("files written outside: %v", extra)
		}
	}

	t.Run("a linked directory component", func(t *testing.T) {
		for _, rel := range []string{"t", "t/1", "t/1/run"} {
			l := newLayout(t)
			replaceWithLink(t, filepath.Join(l.outside, strings.TrimPrefix(rel, "t/1/")), l.path(rel))
			r, err := open(l, "t", "1", "run")
			if !errors.Is(err, rundir.ErrRefused) {
				t.Errorf("%s a link: err %v, want ErrRefused", rel, err)
			}
			if r != nil {
				r.Close()
			}
			unchanged(t, l)
		}
	})
	t.Run("a linked attempt.log, meta.json or meta.json.tmp", func(t *testing.T) {
		l := newLayout(t)
		replaceWithLink(t, l.secretFile, l.path("t/1/run/attempt.log"))
		replaceWithLink(t, l.secretFile, l.path("t/1/run/meta.json"))
		if err := os.Symlink(filepath.Join(l.outside, "run", "attempt.log"), l.path("t/1/run/meta.json.tmp")); err != nil {
			t.Fatal(err)
		}
		run, err := open(l, "t", "1", "run")
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		if f, err := rundir.OpenFile(run, "attempt.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND); !errors.Is(err, rundir.ErrRefused) {
			t.Errorf("attempt.log a link: err %v, want ErrRefused", err)
			if f != nil {
				f.Close()
			}
		}
		// meta.json is replaced: the links at meta.json and its temporary
		// name are removed, not written through.
		if err := rundir.WriteFile(run, "meta.json", []byte(`{"new":true}`)); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(l.path("t/1/run/meta.json"))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != rundir.FileMode&^currentUmask() {
			t.Errorf("meta.json: %v, %v", fi, err)
		}
		unchanged(t, l)
	})
	t.Run("a file of another user is not appended to", func(t *testing.T) {
		// As root: a file given to nobody; otherwise /etc/passwd (root's).
		dir, name := "/etc", "passwd"
		if os.Geteuid() == 0 {
			l := newLayout(t)
			dir, name = l.path("t/1/run"), "attempt.log"
			if err := os.Chown(filepath.Join(dir, name), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		root, err := rundir.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if f, err := rundir.OpenFile(root, name, os.O_CREATE|os.O_WRONLY|os.O_APPEND); !errors.Is(err, rundir.ErrRefused) {
			t.Errorf("another user's %s: err %v, want ErrRefused", name, err)
			if f != nil {
				f.Close()
			}
		}
	})
	t.Run("an existing attempt.log of ours is appended to", func(t *testing.T) {
		l := newLayout(t)
		run, err := open(l, "t", "1", "run")
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		f, err := rundir.OpenFile(run, "attempt.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("more\n"); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got, err := readLog(l.runs); err != nil || got != "the handler's log\nmore\n" {
			t.Errorf("after append: %q, %v", got, err)
		}
	})
}

func currentUmask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

func TestTighten(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := rundir.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for i, want := range []bool{true, false} {
		changed, err := rundir.Tighten(root)
		if err != nil || changed != want {
			t.Fatalf("round %d: changed %v (%v), want %v", i, changed, err, want)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}

func TestNames(t *testing.T) {
	l := newLayout(t)
	root, err := rundir.Open(l.runs, false)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, name := range []string{"", ".", "..", "t/1", `t\1`} {
		if r, err := rundir.Dir(root, false, name); !errors.Is(err, rundir.ErrRefused) {
			t.Errorf("Dir %q: err %v, want ErrRefused", name, err)
			if r != nil {
				r.Close()
			}
		}
		if f, err := rundir.OpenFile(root, name, os.O_RDONLY); !errors.Is(err, rundir.ErrRefused) {
			t.Errorf("OpenFile %q: err %v, want ErrRefused", name, err)
			if f != nil {
				f.Close()
			}
		}
	}
}
