package kafkasink_test

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	if workspaceModule(t, dir) {
		// It requires its siblings at their released versions: the
		// workspace resolves them to the source beside it.
		work, err := filepath.Abs("go.work")
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(os.Environ(), "GOWORK="+work, "GOFLAGS=")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// workspaceModule reports whether go.work uses the module in dir
// (relative to the root module's directory).
func workspaceModule(t *testing.T, dir string) bool {
	t.Helper()
	text, err := os.ReadFile("go.work")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Clean(dir)
	for _, line := range strings.Split(string(text), "\n") {
		if filepath.Clean(strings.TrimSpace(line)) == want && !strings.Contains(line, "=>") {
			return true
		}
	}
	return false
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

// TestModulesImportNoOtherModulesInternal: no module of the repository
// imports another module's internal packages, in its code or in its
// tests: they carry no promise between module versions. What two modules
// share is a supported package (encoding/jsonw, encoding/avrobin,
// debezium, kafkasinktest with its pgtest and rawrecord), or it lives in
// the one module that uses it.
func TestModulesImportNoOtherModulesInternal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command; not in -short")
	}
	mods := repoModules(t)
	if len(mods) < 7 {
		t.Fatalf("found %d modules (%v), want the root and its six nested ones: is the walk broken?", len(mods), mods)
	}
	for dir, mod := range mods {
		lines := goList(t, dir, "-f", "{{.ImportPath}}|{{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
		for _, line := range lines {
			pkg, imports, ok := strings.Cut(line, "|")
			if !ok {
				t.Fatalf("module %s: go list printed %q", mod, line)
			}
			for _, problem := range crossModuleInternal(mod, strings.Fields(imports), mods) {
				t.Errorf("module %s: %s (or its tests) %s", mod, pkg, problem)
			}
		}
	}
}

// TestCrossModuleInternal: the check above flags an internal package of
// another module, the root's included, whichever module imports it, and
// nothing else.
func TestCrossModuleInternal(t *testing.T) {
	const root = "github.com/kafkasink/kafkasink"
	mods := map[string]string{".": root, "cmd/kafkasink": root + "/cmd/kafkasink", "kafkasinkavro": root + "/kafkasinkavro",
		"internal/dockertest": root + "/internal/dockertest"}
	for _, tc := range []struct {
		mod, imp string
		flagged  bool
	}{
		{root + "/cmd/kafkasink", root + "/internal/sinktest", true},
		{root + "/kafkasinkavro", root + "/internal/rawrecord", true},
		{root + "/cmd/kafkasink", root + "/kafkasinkavro/internal/avroschema", true},
		{root, root + "/kafkasinkavro/internal/avroschema", true},
		{root, root + "/internal/dockertest", true},
		{root + "/internal/dockertest", root + "/internal/sinktest", true},
		{root, root + "/internal/sinktest", false},
		{root + "/kafkasinkavro", root + "/kafkasinkavro/internal/avroschema", false},
		{root + "/cmd/kafkasink", root + "/kafkasinktest", false},
		{root + "/cmd/kafkasink", root + "/kafkasinktest/pgtest", false},
		{root + "/cmd/kafkasink", "github.com/twmb/franz-go/pkg/kgo", false},
		{root + "/cmd/kafkasink", "internal/poll", false},
	} {
		problems := crossModuleInternal(tc.mod, []string{tc.imp}, mods)
		if (len(problems) > 0) != tc.flagged {
			t.Errorf("%s importing %s: problems %q, want flagged %v", tc.mod, tc.imp, problems, tc.flagged)
		}
	}
}

// crossModuleInternal returns a problem for each of imports that is an
// internal package (a path element "internal") of a module of mods (by
// directory) other than mod.
func crossModuleInternal(mod string, imports []string, mods map[string]string) []string {
	var out []string
	for _, imp := range imports {
		if !slices.Contains(strings.Split(imp, "/"), "internal") {
			continue
		}
		owner := ""
		for _, m := range mods {
			if (imp == m || strings.HasPrefix(imp, m+"/")) && len(m) > len(owner) {
				owner = m
			}
		}
		if owner != "" && owner != mod {
			out = append(out, fmt.Sprintf("imports %s, an internal package of module %s: use a supported package, or keep it in the one module that uses it", imp, owner))
		}
	}
	return out
}

// repoModules returns the repository's modules, each module path by its
// directory (relative to the root module's), found by their go.mod files.
func repoModules(t *testing.T) map[string]string {
	t.Helper()
	mods := make(map[string]string)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(text), "\n") {
			if mod, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
				mods[filepath.Dir(path)] = strings.Trim(strings.TrimSpace(mod), `"`)
				return nil
			}
		}
		return fmt.Errorf("%s names no module", path)
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}
