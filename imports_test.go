package kafkasink_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goList runs go list with args in dir and returns its lines.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestCoreImportsNoFormat: the core (the root package) knows no format
// package: the debezium package imports the core, never the other way
// round, and no package of the core's dependencies is a format's.
func TestCoreImportsNoFormat(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command; not in -short")
	}
	for _, dep := range goList(t, ".", "-deps", ".") {
		if dep == "github.com/kafkasink/kafkasink/debezium" || strings.HasPrefix(dep, "github.com/kafkasink/kafkasink/kafkasinkavro") {
			t.Errorf("the root package depends on %s: the core must not import a format's package", dep)
		}
	}
}

// internalKeptForTests are the root module's internal packages that the
// tests of other modules of the repository still import, which go
// accepts (their paths are under the root's): the test environment's
// helpers (the brokers, the registry and PostgreSQL of
// scripts/testenv.sh). No module's non-test code may import them, and
// no other internal package may be added here without a reason.
var internalKeptForTests = map[string]bool{
	"github.com/kafkasink/kafkasink/internal/sinktest": true,
}

// TestModulesImportNoOtherModulesInternal: no nested module's code
// imports the root module's internal packages, which carry no promise
// between module versions (what two modules share is a supported
// package: encoding/jsonw, encoding/avrobin, debezium); their tests only
// the ones of internalKeptForTests.
func TestModulesImportNoOtherModulesInternal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command; not in -short")
	}
	const rootInternal = "github.com/kafkasink/kafkasink/internal/"
	for _, mod := range []string{"kafkasinkavro", "cmd/kafkasink", "bench", "kafkasinkprom", "kafkasinkotel"} {
		dir := filepath.FromSlash(mod)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			t.Errorf("module %s: %v", mod, err)
			continue
		}
		lines := goList(t, dir, "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
		for _, line := range lines {
			parts := strings.SplitN(line, "|", 3)
			if len(parts) != 3 {
				t.Fatalf("module %s: go list printed %q", mod, line)
			}
			for _, imp := range strings.Fields(parts[1]) {
				if strings.HasPrefix(imp, rootInternal) {
					t.Errorf("module %s: package %s imports %s, an internal package of the root module: use a supported package, or keep a copy in the module", mod, parts[0], imp)
				}
			}
			for _, imp := range strings.Fields(parts[2]) {
				if strings.HasPrefix(imp, rootInternal) && !internalKeptForTests[imp] {
					t.Errorf("module %s: the tests of %s import %s, an internal package of the root module", mod, parts[0], imp)
				}
			}
		}
	}
}
