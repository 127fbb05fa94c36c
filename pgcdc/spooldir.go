package pgcdc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kafkasink/kafkasink"
)

// spoolDir is the directory of one Run's spool files: its own, named
// after the source (system identifier, database oid, slot) and made
// unique with a random suffix, and locked for as long as Run lives, so
// that a Run never deletes the files of another live process and can
// tell the directories of killed processes apart.
type spoolDir struct {
	path string
	lock *os.File // holds the lock; nil where locks are not supported
}

// spoolLockName is the lock file in a spool directory. It is created
// under a temporary name and renamed once locked, so whoever finds it
// under this name and can lock it knows its owner is gone.
const spoolLockName = "lock"

// spoolDirPrefix is the name of the spool directories of a source, before
// the random suffix.
func spoolDirPrefix(id sourceIdentity) string {
	return fmt.Sprintf("kafkasink-pgcdc-%s-%s-%d", id.Slot, id.SystemID, id.DatabaseOID)
}

// openSpoolDir removes the spool directories of the source in base whose
// owner is gone, then creates and locks one for this Run. It returns how
// many directories it removed.
func openSpoolDir(base string, id sourceIdentity) (*spoolDir, int, error) {
	if base == "" {
		base = os.TempDir()
	}
	prefix := spoolDirPrefix(id)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, 0, spoolDirError(err)
	}
	removed, err := removeAbandonedSpoolDirs(base, prefix)
	if err != nil {
		return nil, removed, err
	}
	path, err := os.MkdirTemp(base, prefix+".")
	if err != nil {
		return nil, removed, spoolDirError(err)
	}
	d := &spoolDir{path: path}
	tmp := filepath.Join(path, spoolLockName+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err == nil {
		if err = tryLock(f); err == nil || errors.Is(err, errors.ErrUnsupported) {
			err = os.Rename(tmp, filepath.Join(path, spoolLockName))
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(path)
		return nil, removed, fmt.Errorf("pgcdc: locking the spool directory %s: %w", path, err)
	}
	d.lock = f
	return d, removed, nil
}

// spoolDirError says that the spool directory cannot be made: fatal, as
// the fix is Config.SpoolDir or the permissions of the directory.
func spoolDirError(err error) error {
	return &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
		"pgcdc: creating the spool directory in Config.SpoolDir (default os.TempDir()): %v: choose a writable directory", err)}}
}

// removeAbandonedSpoolDirs removes the directories base/prefix.* whose
// lock file can be locked: their owner exited or was killed. A directory
// without a lock file is left alone: its owner may be creating it.
func removeAbandonedSpoolDirs(base, prefix string) (int, error) {
	dirs, err := filepath.Glob(filepath.Join(base, prefix+".*"))
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, dir := range dirs {
		if !strings.HasPrefix(filepath.Base(dir), prefix+".") {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, spoolLockName), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if tryLock(f) != nil {
			f.Close() // a live process holds it
			continue
		}
		err = os.RemoveAll(dir)
		f.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// close removes the directory with whatever is left in it and releases
// the lock.
func (d *spoolDir) close() error {
	err := os.RemoveAll(d.path)
	if d.lock != nil {
		d.lock.Close()
	}
	return err
}
