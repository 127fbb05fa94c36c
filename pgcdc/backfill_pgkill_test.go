package pgcdc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
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

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The backfill while the PostgreSQL server dies: the load test's writer
// changes the table while a backfill of it runs, the test SIGKILLs the
// server's postmaster at a random moment of the backfill, and starts the
// server again with pg_ctl, which recovers from the crash. Run, which
// never stops, reconnects and resumes the backfill at the last chunk its
// checkpoint holds; then the load test's checks hold.

// envTestDir is the test environment's runtime directory, which
// scripts/testenv.sh env sets; its default server keeps its data in
// pg/data there.
const envTestDir = "KAFKASINK_TEST_DIR"

// killableServer returns the data directory and the pg_ctl of the
// server KAFKASINK_TEST_PG names, for a test that kills it. It skips
// unless both are set and name another server than the test
// environment's default, which other tests share: CI's whole suite runs
// on the default and skips the test, its runs on the servers up-pg
// starts run it.
func killableServer(t *testing.T) (data, ctl string) {
	t.Helper()
	if !sinktest.Has(envPGData) || !sinktest.Has(envPGCtl) {
		t.Skipf("%s or %s is not set: the test kills the server of %s and starts it with them; scripts/testenv.sh up-pg 16, then eval \"$(scripts/testenv.sh env --pg 16)\"", envPGData, envPGCtl, sinktest.EnvPG)
	}
	v := sinktest.Env(t, envPGData, envPGCtl)
	data, ctl = filepath.Clean(v[0]), v[1]
	if dir := os.Getenv(envTestDir); dir != "" && data == filepath.Join(dir, "pg", "data") {
		t.Skipf("%s=%s is the test environment's default server (%s/pg/data), which other tests share: the test kills only a server of its own; scripts/testenv.sh up-pg 16, then eval \"$(scripts/testenv.sh env --pg 16)\"", envPGData, data, envTestDir)
	}
	return data, ctl
}

// TestBackfillResumesAfterPostgresSIGKILL: the backfill goes on after the
// server it reads is SIGKILLed and started again (crash recovery), from
// the last chunk in the checkpoint; at the end every row's last record
// is its row, none is missing, no read record follows a newer change of
// its key, and each row has at most one record of the backfill.
func TestBackfillResumesAfterPostgresSIGKILL(t *testing.T) {
	data, ctl := killableServer(t)
	began := time.Now()
	l := newBFLoad(t, 10000, "")
	// Killing another server than the one streamed from would prove
	// nothing.
	var dir string
	if err := l.e.db.QueryRow(context.Background(), "SHOW data_directory").Scan(&dir); err != nil {
		t.Fatal(err)
	}
	if filepath.Clean(dir) != data {
		t.Fatalf("%s=%s, but the server of %s keeps its data in %s: eval \"$(scripts/testenv.sh env --pg VERSION)\" sets them together", envPGData, data, sinktest.EnvPG, dir)
	}
	l.serverDies = true
	sink := l.e.newSink(l.e.name)
	ctrl, mon, r := l.startBF(t, sink)
	stopW := make(chan struct{})
	waitW := l.writer(t, stopW)
	defer func() {
		select {
		case <-stopW:
		default:
			close(stopW)
			waitW()
		}
	}()
	time.Sleep(300 * time.Millisecond) // changes flow before the backfill
	st, err := request(t, ctrl, l.table, "")
	if err != nil {
		t.Fatal(err)
	}
	asked := time.Now()

	// The kill, once the backfill has read a random part of the table.
	killAt := int64(1000 + rand.IntN(6000))
	var rowsAtKill int64
	waitFor(t, time.Minute, fmt.Sprintf("the backfill's row %d", killAt), r, func() bool {
		list := ctrl.List()
		if len(list) != 1 {
			t.Fatalf("before the kill: backfills %+v, want %s running", list, st.ID)
		}
		rowsAtKill = list[0].Rows
		return rowsAtKill >= killAt
	})
	killedAfter := time.Since(asked)
	pid, procs := killPostmaster(t, data)
	down := time.Now()
	// The session ends with its connections; until Run connects again,
	// the checkpoint holds what it resumes from.
	waitFor(t, time.Minute, "Run to leave streaming", r, func() bool { return mon.Stats().State != RunStreaming })
	ck, err := parseRunCursor(sink.Checkpoint().Cursor)
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Backfills) != 1 || ck.Backfills[0].ID != st.ID {
		t.Fatalf("the checkpoint after the kill holds backfills %+v, want %s", ck.Backfills, st.ID)
	}
	resumeAt := ck.Backfills[0].Rows
	pgCtlStart(t, ctl, data)
	restarted := time.Since(down)
	l.e.connectAgain(t)
	txnsBack := l.txns.Load()

	// Run streams again, with the same backfill at the checkpoint's
	// rows or further, and finishes it while the writer goes on.
	waitFor(t, time.Minute, "streaming again", r, func() bool { return mon.Stats().State == RunStreaming })
	if list := ctrl.List(); len(list) > 0 && (list[0].ID != st.ID || list[0].Rows < resumeAt) {
		t.Fatalf("after the restart: backfills %+v, want %s at %d rows or more", list, st.ID, resumeAt)
	}
	waitFor(t, time.Minute, "the backfill's end", r, func() bool { return len(ctrl.List()) == 0 })
	if l.txns.Load() == txnsBack {
		t.Fatal("the writer committed nothing after the restart: the backfill did not run under load")
	}
	c := l.settle(t, r, stopW, waitW, st.ID)
	if st := mon.Stats(); st.LastBackfillError != "" || st.Reconnects == 0 {
		t.Errorf("Monitor: last backfill error %q, %d reconnects; want none, and Run's reconnects after the kill", st.LastBackfillError, st.Reconnects)
	}
	if c.reads != c.backfilled || c.backfilled < 9000 {
		t.Errorf("%d read records, %d rows of backfill %s: want each of the table's 10000 rows the writer left, once", c.reads, c.backfilled, st.ID)
	}
	t.Logf("postmaster %d and its %d processes SIGKILLed %v after the request, at %d backfilled rows; the checkpoint held %d; server up again after %v; "+
		"%d records, %d rows of backfill %s, %d rows in the table, %d changes held ahead by a chunk, %d writer transactions (%d of unknown outcome); %v in all",
		pid, procs, killedAfter.Round(time.Millisecond), rowsAtKill, resumeAt, restarted.Round(time.Millisecond),
		c.records, c.backfilled, st.ID, c.rows, c.heldAhead, l.txns.Load(), l.unknown.Load(), time.Since(began).Round(time.Millisecond))
}

// killPostmaster SIGKILLs the postmaster of the server in data, and waits
// until the processes it started have exited too: they notice its
// death, and a new postmaster refuses to start while one of them still
// holds the old shared memory. It returns the postmaster's pid and how
// many processes it had started.
func killPostmaster(t *testing.T, data string) (pid, children int) {
	t.Helper()
	// postmaster.pid's lines: the pid, the data directory, the start
	// time, the port, the first Unix socket directory, ...
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 {
		t.Fatalf("postmaster.pid holds %q: want its pid, port and socket directory", b)
	}
	if pid, err = strconv.Atoi(lines[0]); err != nil {
		t.Fatalf("postmaster.pid begins %q: %v", lines[0], err)
	}
	locks := []string{filepath.Join(data, "postmaster.pid")}
	if lines[4] != "" {
		locks = append(locks, filepath.Join(lines[4], ".s.PGSQL."+lines[3]+".lock"))
	}
	procs := childrenOf(t, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL postmaster %d: %v", pid, err)
	}
	for _, p := range append(procs, pid) {
		for deadline := time.Now().Add(30 * time.Second); running(p); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the killed postmaster %d still runs after 30s", p, pid)
			}
		}
	}
	if _, _, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid)); ok {
		// A zombie no parent reaped yet: dead, but kill(pid, 0), which
		// PostgreSQL tries on the pid in its lock files, still finds
		// it, so a new postmaster would refuse to start.
		for _, f := range locks {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return pid, len(procs)
}

// childrenOf returns the pids of the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range stats {
		if ppid, _, ok := procStat(f); ok && ppid == pid {
			p, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, p)
		}
	}
	return out
}

// running reports whether process pid runs: it exists and is not a
// zombie, which holds no memory but waits for a parent to reap it.
func running(pid int) bool {
	_, state, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	return ok && state != 'Z'
}

// procStat reads the parent pid and the state of a process from its
// /proc stat file; ok is false when it is gone. The fields follow the
// command's name, in parentheses, which may hold anything.
func procStat(file string) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// pgCtlStart starts the server in data with ctl, as the owner of data
// (PostgreSQL refuses to run as root), and waits until it accepts
// connections.
func pgCtlStart(t *testing.T, ctl, data string) {
	t.Helper()
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	// setsid: the server must outlive the test's process group; -l:
	// it must not write to a pipe of ours, and the log beside the data
	// directory is where scripts/testenv.sh keeps it.
	args := []string{"setsid", ctl, "-D", data, "-l", filepath.Join(filepath.Dir(data), "postgres.log"), "start", "-w", "-t", "60"}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		u, err := user.LookupId(strconv.Itoa(int(uid)))
		if err != nil {
			t.Fatalf("the owner of %s: %v", data, err)
		}
		args = append([]string{"runuser", "-u", u.Username, "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
}

// connectAgain replaces the test's connection, which died with its
// server.
func (e *pgEnv) connectAgain(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.db.Close(context.Background())
	db, err := connectAgain(nil, e.conn)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
}

// connectAgain connects to conn after its server died, trying until it
// answers, for a minute at most; nil, nil when stop closes first.
func connectAgain(stop <-chan struct{}, conn string) (*pgx.Conn, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		db, err := pgx.Connect(ctx, conn)
		cancel()
		if err == nil {
			return db, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connecting to the server again: %w", err)
		}
		select {
		case <-stop:
			return nil, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}
