// Package rundir reads and writes the runs directory (--runs-dir:
// <dir>/<table>/<id>/<run_id>/{meta.json,attempt.log}) without ever leaving
// it and without following a symbolic link beneath it.
//
// Anything that can write in the runs directory (another worker sharing
// it, a job's exec command) could otherwise plant a link there and make
// the API show, or the worker write or prune, a file elsewhere. So:
//
//   - Every access goes through an os.Root opened on the directory: no
//     path, however it is resolved, reaches outside it.
//   - No component beneath the directory may be a symbolic link at all,
//     even one that points inside it (O_NOFOLLOW semantics on every
//     component): the worker never makes links, so a link is foreign. Each
//     component is checked with Lstat, opened, and the opened file compared
//     with what Lstat saw (os.SameFile), so a component swapped for a link
//     between the two is refused too.
//   - A file must be a regular file with one hard link; a file opened for
//     writing that exists already must belong to this process's user.
//
// The configured directory itself may be a link (an operator's choice, to
// a mount for instance): it is resolved once, when it is opened.
//
// Directories are made with mode DirMode (0700) and files with FileMode
// (0600): a run directory holds payloads and owner tokens.
package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// Modes of what this package creates.
const (
	DirMode  os.FileMode = 0o700
	FileMode os.FileMode = 0o600
)

// ErrRefused is wrapped by the errors of a path component that is a
// symbolic link, not the kind of file expected, linked more than once, or
// (opened for writing) owned by another user.
var ErrRefused = errors.New("refused in the runs directory")

// Open opens the runs directory dir. With create, a missing dir is made
// (and its missing parents) with DirMode.
func Open(dir string, create bool) (*os.Root, error) {
	r, err := os.OpenRoot(dir)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, DirMode); err != nil {
			return nil, fmt.Errorf("create the runs directory: %w", err)
		}
		r, err = os.OpenRoot(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open the runs directory: %w", err)
	}
	return r, nil
}

// Dir opens the directory beneath r named by elems, one path element
// each, refusing a component that is a link or not a directory. With
// create, missing components are made with DirMode. The caller closes the
// returned root (a new one, also for no elems).
func Dir(r *os.Root, create bool, elems ...string) (*os.Root, error) {
	cur, err := r.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	for _, e := range elems {
		next, err := subdir(cur, e, create)
		cur.Close()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

func subdir(r *os.Root, name string, create bool) (*os.Root, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fi, err := r.Lstat(name)
	if create && errors.Is(err, fs.ErrNotExist) {
		// Mkdir does not follow a link at name: a dangling one is EEXIST.
		if err = r.Mkdir(name, DirMode); err == nil || errors.Is(err, fs.ErrExist) {
			fi, err = r.Lstat(name)
		}
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, refused(r, name, fi, "a directory")
	}
	sub, err := r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	st, err := sub.Stat(".")
	if err == nil && !os.SameFile(fi, st) {
		err = fmt.Errorf("%s/%s: %w: replaced while it was opened", r.Name(), name, ErrRefused)
	}
	if err != nil {
		sub.Close()
		return nil, err
	}
	return sub, nil
}

// OpenFile opens the file name (one path element) in r. It must be a
// regular file with one link; with os.O_CREATE a missing one is made with
// FileMode, and one opened for writing that exists already must belong to
// this process's user. A read never blocks on a FIFO put in its place.
func OpenFile(r *os.Root, name string, flag int) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 {
		// O_EXCL never follows a link: a new file is ours.
		f, err := r.OpenFile(name, flag|os.O_EXCL, FileMode)
		if flag&os.O_EXCL != 0 || !errors.Is(err, fs.ErrExist) {
			return f, err
		}
		flag &^= os.O_CREATE
	}
	fi, err := r.Lstat(name)
	if err != nil {
		return nil, err
	}
	writing := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if err := plainFile(r, name, fi, writing); err != nil {
		return nil, err
	}
	f, err := r.OpenFile(name, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !os.SameFile(fi, st) {
		err = fmt.Errorf("%s/%s: %w: replaced while it was opened", r.Name(), name, ErrRefused)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// plainFile checks what Lstat said of name before it is opened.
func plainFile(r *os.Root, name string, fi fs.FileInfo, writing bool) error {
	if !fi.Mode().IsRegular() {
		return refused(r, name, fi, "a regular file")
	}
	if n, ok := links(fi); ok && n > 1 {
		return fmt.Errorf("%s/%s: %w: it has %d hard links", r.Name(), name, ErrRefused, n)
	}
	if writing && !ownedBySelf(fi) {
		return fmt.Errorf("%s/%s: %w: it belongs to another user", r.Name(), name, ErrRefused)
	}
	return nil
}

// WriteFile replaces the file name in r with data: written to name.tmp
// (made anew, FileMode), then renamed over name, so a reader sees the old
// or the new content. A link at name is replaced, not followed.
func WriteFile(r *os.Root, name string, data []byte) error {
	tmp := name + ".tmp"
	if err := r.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := OpenFile(r, tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}

// ReadDir lists the directory r.
func ReadDir(r *os.Root) ([]os.DirEntry, error) {
	f, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// Tighten removes the group and other permission bits of the directory r
// (opened by Dir, so not a link) and reports whether there were any.
func Tighten(r *os.Root) (bool, error) {
	f, err := r.Open(".")
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if st.Mode().Perm()&0o077 == 0 {
		return false, nil
	}
	return true, f.Chmod(st.Mode().Perm() &^ 0o077)
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("%w: %q is not one path element", ErrRefused, name)
	}
	return nil
}

func refused(r *os.Root, name string, fi fs.FileInfo, want string) error {
	return fmt.Errorf("%s/%s: %w: it is %s, not %s", r.Name(), name, ErrRefused, kind(fi.Mode()), want)
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}
