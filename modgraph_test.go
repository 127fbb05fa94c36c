package kafkasink_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// modulesKeptOut are module path prefixes that must never reach a user's
// module graph: the container tooling only the project's own Docker test
// runner uses (internal/dockertest, a module of its own), and what it
// pulls in; the Schema Registry client and Avro libraries of
// kafkasinkavro, for users who do not use Avro.
var modulesKeptOut = []string{
	"github.com/testcontainers/",
	"github.com/docker/",
	"github.com/moby/",
	"github.com/containerd/",
	"google.golang.org/grpc",
	"go.opentelemetry.io/",
	// The Avro encoder's module (kafkasinkavro) and its tests' readers.
	"github.com/twmb/franz-go/pkg/sr",
	"github.com/hamba/",
	"github.com/twmb/avro",
}

// TestUserModuleGraph builds a user's module that imports the library and
// pgcdc, as `go get` would make it, and checks its module graph (go list
// -m all) holds nothing of modulesKeptOut.
func TestUserModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command; not in -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/kafkasink/kafkasink v0.0.0\n\nreplace github.com/kafkasink/kafkasink => " + root + "\n",
		"main.go": `package main

import (
	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

var _ = kafkasink.New
var _ = pgcdc.Run

func main() {}
`,
	}
	// The library's go.sum has every sum the user's module needs, so
	// that the check needs no checksum database.
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sums)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in a user's module: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("build", "./...")
	graph := run("list", "-m", "all")
	for _, line := range strings.Split(strings.TrimSpace(graph), "\n") {
		for _, prefix := range modulesKeptOut {
			if strings.HasPrefix(line, prefix) {
				t.Errorf("a user's module graph holds %s (prefix %s): keep it out of the library's go.mod", line, prefix)
			}
		}
	}
	t.Logf("a user's module graph: %d modules", len(strings.Split(strings.TrimSpace(graph), "\n")))
}
