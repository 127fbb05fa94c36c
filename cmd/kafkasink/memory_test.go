package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestMemoryLimit pins the soft memory limit the program runs with: derived
// from -batch-max-bytes by default, set by -memory-limit (and its YAML key
// and environment variable), none for 0, and GOMEMLIMIT's own when the
// environment has one.
func TestMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want int64 // 0: no limit set
	}{
		{"derived from the defaults", nil, nil, 16<<20 + 32<<20 + 32<<20},
		{"derived from -batch-max-bytes", []string{"-batch-max-bytes", "4194304"}, nil, 4<<20 + 32<<20 + 32<<20},
		{"-memory-limit", []string{"-memory-limit", "200000000"}, nil, 200000000},
		{"KAFKASINK_MEMORY_LIMIT", nil, map[string]string{"KAFKASINK_MEMORY_LIMIT": "150000000"}, 150000000},
		{"0 is Go's default", []string{"-memory-limit", "0"}, nil, 0},
		{"GOMEMLIMIT wins", []string{"-memory-limit", "200000000"}, map[string]string{"GOMEMLIMIT": "1GiB"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(append([]string{"-pg", "postgres://x@localhost/db", "-brokers", "localhost:9092", "-tables", "public.t", "-slot", "s"}, tt.args...),
				func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := memoryLimit(o, func(k string) string { return tt.env[k] })
			if !ok {
				got = 0
			}
			if got != tt.want {
				t.Errorf("memory limit %d, want %d", got, tt.want)
			}
			before := debug.SetMemoryLimit(-1)
			inForce := setMemoryLimit(o, func(k string) string { return tt.env[k] })
			debug.SetMemoryLimit(before)
			if want := tt.want; (want != 0 && inForce != want) || (want == 0 && inForce != before) {
				t.Errorf("limit in force %d, want %d (before: %d)", inForce, want, before)
			}
		})
	}
}

// TestProgramSetsMemoryLimit runs the program and reads the limit it
// logs as in force: the derived default, -memory-limit's, none for 0, and
// GOMEMLIMIT's when the environment has one. The program cannot reach
// its servers here; it is stopped once it logged the limit.
func TestProgramSetsMemoryLimit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kafkasink")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		name string
		args []string
		env  string
		want int64
	}{
		{"default", nil, "", 16<<20 + 32<<20 + 32<<20},
		{"-memory-limit", []string{"-memory-limit", "123456789"}, "", 123456789},
		{"0", []string{"-memory-limit", "0"}, "", math.MaxInt64},
		{"GOMEMLIMIT", []string{"-memory-limit", "123456789"}, "GOMEMLIMIT=200MiB", 200 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"-pg", "postgres://nobody@127.0.0.1:1/none", "-brokers", "127.0.0.1:1",
				"-tables", "public.t", "-slot", "s", "-ha=false", "-log-format", "text"}, tt.args...)...)
			cmd.Env = []string{"HOME=" + t.TempDir()}
			if tt.env != "" {
				cmd.Env = append(cmd.Env, tt.env)
			}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer cmd.Process.Kill()
			want := fmt.Sprintf(`msg="memory limit" bytes=%d`, tt.want)
			var lines []string
			for sc := bufio.NewScanner(stderr); sc.Scan(); {
				if strings.Contains(sc.Text(), want) {
					return
				}
				if lines = append(lines, sc.Text()); strings.Contains(sc.Text(), "memory limit") {
					break
				}
			}
			t.Errorf("the program did not log %s:\n%s", want, strings.Join(lines, "\n"))
		})
	}
}
