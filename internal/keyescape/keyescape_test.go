package keyescape

import (
	"bytes"
	"testing"
)

// TestInPlaceIsAppend: escaping in place gives what Append gives, and
// leaves the bytes before start alone.
func TestInPlaceIsAppend(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `a|b`, `\N`, `|\|\\|`, "x|"} {
		want := Append([]byte("k|"), s)
		if got := InPlace(append([]byte("k|"), s...), 2); !bytes.Equal(got, want) {
			t.Errorf("InPlace(%q) = %q, want %q", s, got, want)
		}
	}
	if got := Append(nil, `a|b\c`); string(got) != `a\|b\\c` {
		t.Errorf(`Append("a|b\c") = %q, want a\|b\\c`, got)
	}
}
