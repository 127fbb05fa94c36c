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
// scratch) image needs: no ELF interpreter, no shared libraries; and that
// it runs there, printing its flags.
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
	args := append([]string{"build"}, strings.Fields(string(line[1]))...)
	cmd := exec.Command("go", append(args, "-o", bin, ".")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	t.Logf("built with: CGO_ENABLED=0 %s", strings.Join(cmd.Args, " "))

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
