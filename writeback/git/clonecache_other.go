//go:build !unix

package git

import "io/fs"

// lockFolder does nothing where file locks are not available.
func lockFolder(string) (func() error, error) { return func() error { return nil }, nil }

func fileDiskSize(info fs.FileInfo) int64 { return info.Size() }

// checkFolderOwner cannot tell owners apart here.
func checkFolderOwner(string) error { return nil }
