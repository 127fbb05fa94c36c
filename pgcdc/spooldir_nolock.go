//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pgcdc

import (
	"errors"
	"os"
)

// tryLock cannot lock on this system. A Run then spools unlocked, and
// never removes another directory: abandoned spool directories are left
// for the operator rather than risk deleting a live process's files.
func tryLock(*os.File) error { return errors.ErrUnsupported }
