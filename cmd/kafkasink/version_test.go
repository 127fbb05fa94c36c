package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestCommand: the first argument may name a command, run by default;
// -version anywhere before "--" is the version command.
func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		cmd  string
		rest []string
	}{
		{nil, "run", nil},
		{[]string{"-pg", "x"}, "run", []string{"-pg", "x"}},
		{[]string{"run", "-pg", "x"}, "run", []string{"-pg", "x"}},
		{[]string{"version"}, "version", nil},
		{[]string{"-pg", "x", "-version"}, "version", nil},
		{[]string{"--version"}, "version", nil},
		{[]string{"help"}, "help", nil},
		{[]string{"-tables", "--", "-version"}, "run", []string{"-tables", "--", "-version"}},
	} {
		if cmd, rest := command(tc.args); cmd != tc.cmd || !slices.Equal(rest, tc.rest) {
			t.Errorf("command(%q) = %s %q, want %s %q", tc.args, cmd, rest, tc.cmd, tc.rest)
		}
	}
}

// TestVersionIsStamped builds the program as a release is built, with the
// version and commit stamped by -ldflags -X, and checks that -version and
// kafkasink version print them with the Go version; and that a build
// without a stamp in a clone prints the commit it was built from.
func TestVersionIsStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program: skipped with -short")
	}
	dir := t.TempDir()
	stamped := filepath.Join(dir, "stamped")
	if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=v0.1.0-test -X main.commit=0123abc", "-o", stamped, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := "kafkasink v0.1.0-test, commit 0123abc, " + runtime.Version() + "\n"
	for _, args := range [][]string{{"-version"}, {"version"}, {"-pg", "postgres://h/db", "-version"}} {
		out, err := exec.Command(stamped, args...).Output()
		if err != nil || string(out) != want {
			t.Errorf("kafkasink %s: %q, %v; want %q", strings.Join(args, " "), out, err, want)
		}
	}

	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git to find the commit built: %v", err)
	}
	// The go command finds a git checkout by its .git directory; a
	// worktree's .git is a file, so its builds carry no commit.
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if fi, serr := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || serr != nil || !fi.IsDir() {
		t.Skip("not in a git clone (a worktree?): the go command records no commit")
	}
	plain := filepath.Join(dir, "plain")
	// -buildvcs=true: GOFLAGS may turn it off.
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", plain, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(plain, "version").Output()
	if wantCommit := "commit " + strings.TrimSpace(string(head)); err != nil || !strings.Contains(string(out), wantCommit) {
		t.Errorf("kafkasink version, unstamped: %q, %v; want %q from the build's VCS information", out, err, wantCommit)
	}
}
