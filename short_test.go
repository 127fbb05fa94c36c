package kafkasink_test

import "testing"

// skipInShort skips a slow test under `go test -short`, the README's first
// test command; CI runs the whole suite. docs/integration-tests.md lists
// every test -short leaves out or cuts down, and TestShortListIsDocumented
// keeps that list true.
func skipInShort(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s: left out by -short; the full suite runs it (docs/integration-tests.md)", why)
	}
}
