package pgcdc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestSpoolDirOwnership opens two spool directories of one source in one
// base, as two live Runs would: each gets its own, neither removes the
// other's; once one is closed, its directory is gone, and once a holder
// dies without closing (its lock released, its files left), the next
// open removes what it left.
func TestSpoolDirOwnership(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	id := sourceIdentity{SystemID: "7001", DatabaseOID: 5, Slot: "s1"}
	a, removed, err := openSpoolDir(base, id)
	if err != nil || removed != 0 {
		t.Fatalf("first open: %v, %d removed", err, removed)
	}
	spooled := filepath.Join(a.path, "kafkasink-pgcdc-xid1-1.spool")
	if err := os.WriteFile(spooled, []byte("live"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, removed, err := openSpoolDir(base, id)
	if err != nil || removed != 0 || b.path == a.path {
		t.Fatalf("second open: %v, %d removed, path %s (first %s)", err, removed, b.path, a.path)
	}
	if _, err := os.Stat(spooled); err != nil {
		t.Fatalf("a live Run's spool file is gone: %v", err)
	}
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a closed spool directory is still there: %v", err)
	}
	// The first holder dies: its lock goes with its file descriptor.
	a.lock.Close()
	c, removed, err := openSpoolDir(base, id)
	if err != nil || removed != 1 {
		t.Fatalf("open after a holder died: %v, %d removed, want 1", err, removed)
	}
	defer c.close()
	if _, err := os.Stat(a.path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dead holder's spool directory is still there: %v", err)
	}
}
