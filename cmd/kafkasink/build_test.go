package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStaticBuild runs the Dockerfile's go build line (read from it, so
// the two cannot drift apart) with the output in a temporary directory,
// and checks that the binary is static, as a distroless static (or
// scratch) image needs: no ELF interpreter, no shared libraries; that it
// prints the version and commit given as build arguments; and that it
// runs there, printing its flags.
func TestStaticBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the program: skipped with -short")
	}
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^RUN cd cmd/kafkasink && CGO_ENABLED=0 go build (.*) -o (\S+) \.$`).FindSubmatch(dockerfile)
	if line == nil {
		t.Fatal("the Dockerfile has no line RUN cd cmd/kafkasink && CGO_ENABLED=0 go build ... -o <path> .")
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(string(line[2])))
	// The shell expands the build arguments, as docker build's RUN does.
	cmd := exec.Command("sh", "-c", "go build "+string(line[1])+` -o "$BIN" .`)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "BIN="+bin, "VERSION=v0.1.0-docker", "COMMIT=0123abc")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	t.Logf("built with: CGO_ENABLED=0 VERSION=v0.1.0-docker COMMIT=0123abc %s", strings.Join(cmd.Args, " "))
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "kafkasink v0.1.0-docker, commit 0123abc, ") {
		t.Errorf("%s version: %q, %v; want the VERSION and COMMIT build arguments stamped", bin, out, err)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q (%v)", libs, err)
	}

	var stderr bytes.Buffer
	help := exec.Command(bin, "-h")
	help.Stderr = &stderr
	if err := help.Run(); err != nil || !strings.Contains(stderr.String(), "-config") || !strings.Contains(stderr.String(), "-http-addr") {
		t.Errorf("%s -h: %v\n%s", bin, err, stderr.String())
	}
}
