package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one PostgreSQL server a test started in a directory of its
// own (see StartPair): its data directory, Unix socket and log. It is not
// safe for concurrent use: one goroutine of the test drives it.
type Server struct {
	t    testing.TB
	Name string // "primary" or "standby", as its directory and errors say
	Port int    // its loopback TCP port
	dir  string // holds data/, the socket and postgres.log
	bin  string // the server's binaries: initdb, pg_ctl, postgres
	// asUser runs a program as the server's OS user: runuser when we are
	// root, which PostgreSQL refuses; nothing otherwise.
	asUser []string
}

// ConnString returns the URL of database db on the server, as the role
// kafkasink (a superuser with REPLICATION) over TCP.
func (s *Server) ConnString(db string) string {
	return fmt.Sprintf("postgres://kafkasink:kafkasink@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// DataDir returns the server's data directory.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// Connect opens a connection to database db, closed at the test's end.
func (s *Server) Connect(db string) *pgx.Conn {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.ConnString(db))
	if err != nil {
		s.t.Fatalf("pgtest: connecting to the %s: %v", s.Name, err)
	}
	s.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// Exec runs sql (statements separated by ";") on database kafkasink in
// a connection of its own.
func (s *Server) Exec(sql string) {
	s.t.Helper()
	s.execOn(s.ConnString("kafkasink"), sql)
}

func (s *Server) execOn(conn, sql string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, conn)
	if err == nil {
		_, err = c.Exec(ctx, sql)
		c.Close(ctx)
	}
	if err != nil {
		s.t.Fatalf("pgtest: on the %s: %s: %v", s.Name, sql, err)
	}
}

// Start starts the server and waits until it accepts connections (a
// standby: until it reached a consistent state and allows reads).
func (s *Server) Start() {
	s.t.Helper()
	// setsid: the postmaster leads a process group of its own, which Kill
	// ends whole.
	s.run("setsid", filepath.Join(s.bin, "pg_ctl"), "-D", s.DataDir(), "-l", filepath.Join(s.dir, "postgres.log"),
		"-w", "-t", "60", "start")
}

// Stop stops the server cleanly (pg_ctl stop -m fast): sessions are cut,
// a shutdown checkpoint is written, a primary first sends its standby
// every WAL record.
func (s *Server) Stop() {
	s.t.Helper()
	s.run(filepath.Join(s.bin, "pg_ctl"), "-D", s.DataDir(), "-m", "fast", "-w", "-t", "60", "stop")
}

// Kill ends the postmaster and every process of the server with SIGKILL,
// as a crash of its machine would, and waits until they are gone. Start
// starts it again, with crash recovery.
func (s *Server) Kill() {
	s.t.Helper()
	if err := s.killGroup(); err != nil {
		s.t.Fatalf("pgtest: Kill: the %s: %v", s.Name, err)
	}
}

func (s *Server) killGroup() error {
	pid := s.postmasterPID()
	if pid == 0 {
		return fmt.Errorf("not running (no postmaster.pid in %s)", s.DataDir())
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		return fmt.Errorf("postmaster %d: %v (not running?)", pid, err)
	}
	if pgid == syscall.Getpgrp() {
		return fmt.Errorf("postmaster %d is in the test's own process group; Start runs it in one of its own", pid)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of group %d still run 30s after SIGKILL", pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Promote promotes a standby (pg_ctl promote) and waits until it is out
// of recovery and takes writes.
func (s *Server) Promote() {
	s.t.Helper()
	s.run(filepath.Join(s.bin, "pg_ctl"), "-D", s.DataDir(), "-w", "-t", "60", "promote")
	s.waitFor("out of recovery after promote", "SELECT NOT pg_is_in_recovery()")
}

// Query returns the first column of the first row of sql on database
// kafkasink as fmt.Sprint prints it ("" for NULL), in a connection of its own.
func (s *Server) Query(sql string, args ...any) string {
	s.t.Helper()
	v, err := s.query(sql, args...)
	if err != nil {
		s.t.Fatalf("pgtest: on the %s: %s: %v", s.Name, sql, err)
	}
	return v
}

func (s *Server) query(sql string, args ...any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.ConnString("kafkasink"))
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	var v any
	if err := c.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
		return "", err
	}
	if v == nil {
		return "", nil
	}
	return fmt.Sprint(v), nil
}

// waitFor polls sql, a query of one boolean, until it is true, for up
// to a minute; what names the state in the failure.
func (s *Server) waitFor(what, sql string, args ...any) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := s.query(sql, args...)
		if err == nil && v == "true" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("pgtest: the %s is not %s after a minute (%s: %q, %v; log: %s)", s.Name, what, sql, v, err, filepath.Join(s.dir, "postgres.log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// postmasterPID returns the pid in postmaster.pid, 0 without one.
func (s *Server) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(s.DataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// run runs a program as the server's OS user, failing the test with its
// output and the end of the server's log.
func (s *Server) run(args ...string) {
	s.t.Helper()
	args = append(append([]string(nil), s.asUser...), args...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("pgtest: %s: %s: %v\n%s\nlog (%s):\n%s", s.Name, strings.Join(args, " "), err, out,
			filepath.Join(s.dir, "postgres.log"), tail(filepath.Join(s.dir, "postgres.log"), 20))
	}
}

// appendConf adds lines to the server's postgresql.conf; later lines win.
func (s *Server) appendConf(lines ...string) {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.DataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString("\n" + strings.Join(lines, "\n") + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		s.t.Fatalf("pgtest: configuring the %s: %v", s.Name, err)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// serverOSUser returns how to run PostgreSQL's programs and who must own
// its directories: as root, which PostgreSQL refuses, the postgres user
// through runuser; otherwise whoever we are (nil, nil). It skips t where
// root has no postgres user or no runuser.
func serverOSUser(t testing.TB) (asUser []string, owner *user.User) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, nil
	}
	owner, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("running as root, which PostgreSQL refuses, and there is no postgres user to run it as: useradd --system postgres (scripts/testenv.sh up-pg makes it)")
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skipf("running as root, which PostgreSQL refuses, and there is no runuser to run it as the postgres user")
	}
	return []string{"runuser", "-u", "postgres", "--"}, owner
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
