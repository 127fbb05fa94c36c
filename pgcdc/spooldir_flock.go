//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pgcdc

import (
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting. The lock lasts
// until f is closed or the process ends, killed or not.
func tryLock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
