//go:build unix

package rundir

import (
	"io/fs"
	"os"
	"syscall"
)

// links is the file's hard link count.
func links(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

// ownedBySelf says whether the file belongs to this process's effective user.
func ownedBySelf(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Geteuid()
}
