//go:build unix

package git

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// lockFolder takes an exclusive lock on a folder for this process, which
// the returned function lets go of. Two processes writing to one clone
// would corrupt it, and each would remove the other's unfinished clones.
func lockFolder(dir string) (func() error, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errFolderBusy
		}
		return nil, err
	}
	// Closing the file lets go of the lock.
	return f.Close, nil
}

// checkFolderOwner refuses a folder that is not a directory this process's
// user owns, or that other users may write.
func checkFolderOwner(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return errors.New("not a folder")
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("owned by uid %d, not %d", st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("writable by others (mode %v)", fi.Mode().Perm())
	}
	return nil
}

// fileDiskSize is the space a file takes on disk: its allocated blocks,
// which for the many small files of a clone is more than their length.
func fileDiskSize(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}
