package kafkasink_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEQuotesServiceExample checks that the README's "Using it" is the
// code of example_service_test.go between its README markers, which
// Example_service compiles and runs, so the README's code cannot drift.
func TestREADMEQuotesServiceExample(t *testing.T) {
	src, err := os.ReadFile("example_service_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(src, []byte("\n// README begin\n\n"))
	quoted, _, ok2 := bytes.Cut(rest, []byte("\n// README end\n"))
	if !ok || !ok2 {
		t.Fatal("example_service_test.go: the README begin and end markers are missing")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := "```go\n" + string(quoted) + "```\n"
	if !bytes.Contains(readme, []byte(block)) {
		t.Errorf("README.md has no ```go block equal to example_service_test.go's code between its README markers; paste it again:\n%s", block)
	}
}

// TestCIRunsREADMECommands checks that .ci/run runs the commands the
// README gives: the first two, and the whole suite's.
func TestCIRunsREADMECommands(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var ciLines []string
	for line := range strings.Lines(string(ci)) {
		ciLines = append(ciLines, strings.TrimSpace(line))
	}
	commands := 0
	for _, block := range strings.Split(string(readme), "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for line := range strings.Lines(block) {
			cmd, _, _ := strings.Cut(line, "#")
			cmd = strings.TrimSpace(cmd)
			if !strings.HasPrefix(cmd, "go test") && !strings.HasPrefix(cmd, "go run ./examples/") {
				continue
			}
			commands++
			found := false
			for _, l := range ciLines {
				found = found || l == cmd || strings.HasPrefix(l, cmd+" ")
			}
			if !found {
				t.Errorf(".ci/run does not run the README's %q", cmd)
			}
		}
	}
	if commands < 3 {
		t.Errorf("found %d test commands in the README's sh blocks, want the quickstart, the short and the whole suite", commands)
	}
}

// TestREADMEListsPackages checks the README's "Packages and modules": every
// package of the repository but internal ones is linked from it.
func TestREADMEListsPackages(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == ".":
			case name == "internal" || name == "testdata" || name == "third_party" || name == "scripts" || strings.HasPrefix(name, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.ToSlash(filepath.Dir(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		if !bytes.Contains(readme, []byte("]("+dir+")")) {
			t.Errorf("README.md's \"Packages and modules\" does not link the package in %s", dir)
		}
	}
	if len(dirs) < 5 {
		t.Errorf("found %d packages; the walk is broken", len(dirs))
	}
}

// markdownLink matches [text](target) and captures the target.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve checks every relative link of README.md and docs/:
// the file or directory exists in the repository, and a #fragment names a
// heading of the Markdown file it points into.
func TestDocsLinksResolve(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md", "third_party/apicurio3/README.md")
	links := 0
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markdownLink.FindAllSubmatch(withoutCode(text), -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, fragment, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q: %v", file, target, err)
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(resolved, ".md") {
				t.Errorf("%s: link %q: a fragment into a file that is not Markdown", file, target)
				continue
			}
			dest, err := os.ReadFile(resolved)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(headingAnchors(dest), fragment) {
				t.Errorf("%s: link %q: %s has no heading with that anchor (it has %q)", file, target, resolved, headingAnchors(dest))
			}
		}
	}
	if links < 20 {
		t.Errorf("found %d relative links; the docs have more, so the link pattern is broken", links)
	}
}

// withoutCode blanks fenced code blocks, whose brackets are not links.
func withoutCode(md []byte) []byte {
	var out []byte
	fenced := false
	for line := range bytes.Lines(md) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("```")) {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line...)
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub makes of a Markdown file's
// headings: lower case, spaces as hyphens, punctuation but - and _ dropped.
func headingAnchors(md []byte) []string {
	var anchors []string
	for line := range bytes.Lines(withoutCode(md)) {
		s := strings.TrimSpace(string(line))
		if !strings.HasPrefix(s, "#") {
			continue
		}
		s = strings.TrimSpace(strings.TrimLeft(s, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
				b.WriteRune(r)
			}
		}
		anchors = append(anchors, b.String())
	}
	return anchors
}

// TestShortListIsDocumented checks docs/integration-tests.md's list of what
// `go test -short` leaves out against the code: every test function of this
// module that calls testing.Short or skipInShort is listed there, by name,
// and every name listed is such a function.
func TestShortListIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/integration-tests.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := bytes.Cut(doc, []byte("<!-- short list begin -->"))
	section, _, ok := bytes.Cut(section, []byte("<!-- short list end -->"))
	if !ok {
		t.Fatal("docs/integration-tests.md: the short list markers are missing")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`((?:Test|Example)\\w+)`").FindAllSubmatch(section, -1) {
		listed = append(listed, string(m[1]))
	}

	var inCode []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module: not run by the README's command
				}
				if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			if callsShort(fn.Body) {
				inCode = append(inCode, fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(inCode)
	slices.Sort(listed)
	for _, name := range inCode {
		if !slices.Contains(listed, name) {
			t.Errorf("%s is cut down or skipped by -short but not listed in docs/integration-tests.md", name)
		}
	}
	for _, name := range listed {
		if !slices.Contains(inCode, name) {
			t.Errorf("docs/integration-tests.md lists %s, which does not call testing.Short or skipInShort", name)
		}
	}
}

// callsShort reports whether a function body calls testing.Short() or
// skipInShort.
func callsShort(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		switch fn := call.Fun.(type) {
		case *ast.Ident:
			found = found || fn.Name == "skipInShort"
		case *ast.SelectorExpr:
			if x, ok := fn.X.(*ast.Ident); ok && x.Name == "testing" && fn.Sel.Name == "Short" {
				found = true
			}
		}
		return !found
	})
	return found
}
