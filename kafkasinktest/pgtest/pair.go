package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PairOptions say what StartPair starts.
type PairOptions struct {
	// Major is the PostgreSQL major version of both servers; 0 means the
	// test environment's (KAFKASINK_TEST_PG_CTL's binaries).
	Major int
	// FailoverSlots (17+) makes the standby synchronise the primary's
	// failover slots (sync_replication_slots = on) and the primary hold
	// logical walsenders back until the standby has the WAL they send
	// (synchronized_standby_slots names the standby's physical slot).
	// StartPair skips the test on a major before 17.
	FailoverSlots bool
	// Synchronous makes the standby synchronous (synchronous_standby_names
	// on the primary): a commit returns once the standby has flushed it.
	Synchronous bool
}

// StandbySlot is the physical replication slot on the primary through
// which the standby of StartPair streams, and its application_name.
const StandbySlot = "standby1"

// Pair is a primary and its streaming hot standby.
type Pair struct {
	Major            int
	Primary, Standby *Server
}

// StartPair starts a primary and a streaming hot standby of it, of the
// major version opts.Major, in a temporary directory of their own on free
// loopback ports, and stops and removes them at the test's end. Both have
// wal_level = logical, hot_standby_feedback = on on the standby, the role
// kafkasink (SUPERUSER REPLICATION, password kafkasink, trust
// authentication) and its database kafkasink. The standby streams through
// the physical slot StandbySlot; ConnString names either server,
// MultiHostConnString both.
//
// The binaries are the test environment's: Debian's for 15
// (/usr/lib/postgresql/15/bin), and for every major those
// scripts/testenv.sh up-pg MAJOR unpacked beside its runtime directory
// (KAFKASINK_TEST_DIR). Where they are missing, StartPair skips t naming
// the command that provides them. The standby is made from a copy of the
// primary's data directory taken while the primary is cleanly stopped, a
// valid base backup: those binaries have no pg_basebackup.
func StartPair(t testing.TB, opts PairOptions) *Pair {
	t.Helper()
	bin, major := serverBinaries(t, opts.Major)
	if opts.FailoverSlots && major < 17 {
		t.Skipf("PostgreSQL %d has no failover slots (sync_replication_slots): PostgreSQL 17 has them", major)
	}
	asUser, owner := serverOSUser(t)
	root, err := os.MkdirTemp("", "kafkasink-pgpair-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	p := &Pair{Major: major}
	t.Cleanup(func() { p.remove(root) })
	newServer := func(name string) *Server {
		s := &Server{t: t, Name: name, Port: freePort(t), dir: filepath.Join(root, name), bin: bin, asUser: asUser}
		mkdirOwned(t, s.dir, owner)
		return s
	}
	mkdirOwned(t, root, owner)
	p.Primary, p.Standby = newServer("primary"), newServer("standby")
	p.initPrimary(opts)
	p.Primary.Stop()
	p.copyToStandby(opts)
	p.waitForStandby(opts)
	p.Primary.Start()
	p.Standby.Start()
	p.WaitStreaming()
	return p
}

// initPrimary makes the primary's cluster, starts it, and creates the
// role, the database and the standby's slot.
func (p *Pair) initPrimary(opts PairOptions) {
	s := p.Primary
	s.t.Helper()
	s.run(filepath.Join(s.bin, "initdb"), "-D", s.DataDir(), "-U", "postgres", "-E", "UTF8", "--locale=C", "--auth=trust")
	conf := []string{
		"# --- kafkasink pgtest: primary ---",
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("port = %d", s.Port),
		fmt.Sprintf("unix_socket_directories = '%s'", s.dir),
		"wal_level = logical",
		"max_replication_slots = 20",
		"max_wal_senders = 20",
		"hot_standby = on",
		"fsync = off",
		"log_min_messages = warning",
	}
	s.appendConf(conf...)
	s.Start()
	// The bootstrap superuser, over TCP with trust authentication: these
	// binaries carry no psql.
	boot := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	s.execOn(boot, "CREATE ROLE kafkasink LOGIN SUPERUSER REPLICATION PASSWORD 'kafkasink'")
	s.execOn(boot, "CREATE DATABASE kafkasink OWNER kafkasink")
	s.Exec(fmt.Sprintf("SELECT pg_create_physical_replication_slot('%s', true)", StandbySlot))
}

// waitForStandby configures what the primary waits for from the
// standby, after the copy: the standby, once promoted, waits for nobody,
// and the primary's own set-up did not wait for a standby not yet there.
func (p *Pair) waitForStandby(opts PairOptions) {
	var conf []string
	if opts.FailoverSlots {
		conf = append(conf, fmt.Sprintf("synchronized_standby_slots = '%s'", StandbySlot))
	}
	if opts.Synchronous {
		conf = append(conf, fmt.Sprintf("synchronous_standby_names = '%s'", StandbySlot))
	}
	if len(conf) > 0 {
		p.Primary.appendConf(conf...)
	}
}

// copyToStandby copies the cleanly stopped primary's data directory to
// the standby's and makes it a hot standby streaming from the primary.
func (p *Pair) copyToStandby(opts PairOptions) {
	s := p.Standby
	s.t.Helper()
	s.run("cp", "-a", p.Primary.DataDir(), s.DataDir())
	// The primary's slots are its own; a standby keeps none of them.
	slots, err := filepath.Glob(filepath.Join(s.DataDir(), "pg_replslot", "*"))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, d := range slots {
		if err := os.RemoveAll(d); err != nil {
			s.t.Fatalf("pgtest: %v", err)
		}
	}
	_ = os.Remove(filepath.Join(s.DataDir(), "postmaster.pid"))
	conf := []string{
		"# --- kafkasink pgtest: standby ---",
		fmt.Sprintf("port = %d", s.Port),
		fmt.Sprintf("unix_socket_directories = '%s'", s.dir),
		// dbname: the slot sync worker of 17+ needs a database.
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=kafkasink password=kafkasink dbname=kafkasink application_name=%s'", p.Primary.Port, StandbySlot),
		fmt.Sprintf("primary_slot_name = '%s'", StandbySlot),
		"hot_standby_feedback = on",
	}
	if opts.FailoverSlots {
		conf = append(conf, "sync_replication_slots = on")
	}
	s.appendConf(conf...)
	f, err := os.Create(filepath.Join(s.DataDir(), "standby.signal"))
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
}

// MultiHostConnString returns a URL naming both servers, primary first,
// that connects to whichever takes writes (target_session_attrs =
// read-write): after a failover, the promoted standby.
func (p *Pair) MultiHostConnString(db string) string {
	return fmt.Sprintf("postgres://kafkasink:kafkasink@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		p.Primary.Port, p.Standby.Port, db)
}

// WaitStreaming waits until the standby streams from the primary.
func (p *Pair) WaitStreaming() {
	p.Standby.t.Helper()
	p.Standby.waitFor("streaming from the primary", "SELECT EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')")
}

// WaitReplayed waits until the standby replayed every WAL record the
// primary has written so far.
func (p *Pair) WaitReplayed() {
	p.Standby.t.Helper()
	lsn := p.Primary.Query("SELECT pg_current_wal_lsn()::text")
	p.Standby.waitFor("replayed to "+lsn, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", lsn)
}

// WaitSynced waits until the standby holds a synchronised copy of the
// primary's failover slot (17+: pg_replication_slots.synced), which the
// slot sync worker makes within seconds and, for a new slot, once the
// standby has replayed past the slot's position: a running-xacts record
// of the primary (pg_log_standby_snapshot) gets it there sooner.
func (s *Server) WaitSynced(slot string) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := s.query("SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND synced AND NOT temporary AND NOT conflicting)", slot)
		if err == nil && v == "true" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("pgtest: the %s has no synchronised slot %s after a minute (%q, %v; log: %s)", s.Name, slot, v, err, filepath.Join(s.dir, "postgres.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PauseReplication stops the standby's streaming (its primary_conninfo
// made empty and reloaded) and waits until its WAL receiver is gone: what
// the primary writes from now on does not reach the standby.
func (p *Pair) PauseReplication() {
	p.Standby.t.Helper()
	p.Standby.Exec("ALTER SYSTEM SET primary_conninfo = ''")
	p.Standby.Exec("SELECT pg_reload_conf()")
	p.Standby.waitFor("without a WAL receiver", "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)")
}

// ResumeReplication undoes PauseReplication and waits until the standby
// streams again.
func (p *Pair) ResumeReplication() {
	p.Standby.t.Helper()
	p.Standby.Exec("ALTER SYSTEM RESET primary_conninfo")
	p.Standby.Exec("SELECT pg_reload_conf()")
	p.WaitStreaming()
}

// remove stops both servers at once (SIGKILL: nothing of them is kept)
// and removes their directory.
func (p *Pair) remove(root string) {
	for _, s := range []*Server{p.Primary, p.Standby} {
		if s != nil {
			_ = s.killGroup() // an error: it was not running
		}
	}
	_ = os.RemoveAll(root)
}

// serverBinaries returns the directory of the binaries of PostgreSQL
// major (0: the test environment's) and that major, or skips t naming
// the command that provides them.
func serverBinaries(t testing.TB, major int) (string, int) {
	t.Helper()
	var candidates []string
	if ctl := os.Getenv("KAFKASINK_TEST_PG_CTL"); ctl != "" {
		candidates = append(candidates, filepath.Dir(ctl))
	} else if major == 0 {
		t.Skipf("KAFKASINK_TEST_PG_CTL not set: it names the test environment's PostgreSQL binaries, which a primary and standby of its version run; eval \"$(scripts/testenv.sh env)\" (env --pg VERSION for another version) sets it")
	}
	if major != 0 {
		candidates = append(candidates, fmt.Sprintf("/usr/lib/postgresql/%d/bin", major))
		dir := os.Getenv("KAFKASINK_TEST_DIR")
		if dir == "" {
			dir = "/tmp/kafkasink-testenv"
		}
		found, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("postgresql-%d.*", major), "bin"))
		candidates = append(candidates, found...)
	}
	for _, bin := range candidates {
		m, err := binariesMajor(bin)
		if err == nil && (major == 0 || m == major) {
			return bin, m
		}
	}
	t.Skipf("PostgreSQL %d's server binaries (initdb, pg_ctl, postgres) are not here: scripts/testenv.sh up-pg %d provides them", major, major)
	return "", 0
}

// binariesMajor runs bin/postgres --version ("postgres (PostgreSQL)
// 17.11") and returns its major version.
func binariesMajor(bin string) (int, error) {
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		return 0, err
	}
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("%s/postgres --version: %q", bin, out)
	}
	return strconv.Atoi(strings.SplitN(f[len(f)-1], ".", 2)[0])
}

// mkdirOwned makes dir, readable by all, owned by owner when not nil.
func mkdirOwned(t testing.TB, dir string, owner *user.User) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if owner == nil {
		return
	}
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(owner.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}
