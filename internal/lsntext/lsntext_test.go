package lsntext

import (
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		lsn  uint64
		text string
	}{
		{0, "0/0"},
		{0x16_B374D848, "16/B374D848"},
		{1<<64 - 1, "FFFFFFFF/FFFFFFFF"},
	} {
		if got := string(Append([]byte("x"), tt.lsn)); got != "x"+tt.text {
			t.Errorf("Append(%#x) = %q, want %q", tt.lsn, got, "x"+tt.text)
		}
		if got, err := Parse(tt.text); err != nil || got != tt.lsn {
			t.Errorf("Parse(%q) = %#x, %v; want %#x", tt.text, got, err, tt.lsn)
		}
	}
	if got, err := Parse("16/b374d848"); err != nil || got != 0x16_B374D848 {
		t.Errorf("Parse of lower case = %#x, %v", got, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"", "16", "/1", "1/", "1/2/3", "G/1", "100000000/0", "-1/0"} {
		_, err := Parse(s)
		if err == nil || !strings.Contains(err.Error(), "like 16/B374D848") {
			t.Errorf("Parse(%q) = %v, want an error showing the form", s, err)
		}
	}
}
