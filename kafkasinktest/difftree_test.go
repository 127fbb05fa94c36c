package kafkasinktest_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// DiffTrees reports each difference by its path, in sorted order: a
// member one side lacks as Absent, a shape against another, and leaves
// that same says differ; equal trees give nothing.
func TestDiffTrees(t *testing.T) {
	t.Parallel()
	same := func(w, g any) bool { return fmt.Sprint(w) == fmt.Sprint(g) } // 1 and "1" are the same leaf
	want := map[string]any{
		"a": 1, "b": map[string]any{"x": "1", "y": []any{1, 2}}, "c": []any{1}, "d": "leaf", "gone": true,
	}
	got := map[string]any{
		"a": "1", "b": map[string]any{"x": 2, "y": []any{1, 3}}, "c": []any{1, 2}, "d": map[string]any{}, "new": nil,
	}
	var diffs []string
	kafkasinktest.DiffTrees("v", want, got, same, func(path string, w, g any) {
		diffs = append(diffs, fmt.Sprintf("%s: %v | %v", path, w, g))
	})
	wantDiffs := []string{
		"v.b.x: 1 | 2",
		"v.b.y[1]: 2 | 3",
		"v.c: [1] | [1 2]",
		"v.d: leaf | map[]",
		"v.gone: true | {}",
		"v.new: {} | <nil>",
	}
	if !reflect.DeepEqual(diffs, wantDiffs) {
		t.Errorf("differences:\n%q\nwant\n%q", diffs, wantDiffs)
	}
	var absent []string
	kafkasinktest.DiffTrees("v", want, got, same, func(path string, w, g any) {
		if _, ok := w.(kafkasinktest.Absent); ok {
			absent = append(absent, "want lacks "+path)
		}
		if _, ok := g.(kafkasinktest.Absent); ok {
			absent = append(absent, "got lacks "+path)
		}
	})
	if !reflect.DeepEqual(absent, []string{"got lacks v.gone", "want lacks v.new"}) {
		t.Errorf("Absent sides: %q", absent)
	}
	kafkasinktest.DiffTrees("v", want, want, same, func(path string, w, g any) {
		t.Errorf("a tree against itself: difference at %s", path)
	})
}
