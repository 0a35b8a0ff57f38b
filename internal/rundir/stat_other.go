//go:build !unix

package rundir

import "io/fs"

// links is unknown here: no check.
func links(fs.FileInfo) (uint64, bool) { return 0, false }

// ownedBySelf cannot be checked here (the directory's ACL decides).
func ownedBySelf(fs.FileInfo) bool { return true }
