package topicadmin

import (
	"strings"
	"testing"
)

// TestValidateName: Kafka's rules for topic names, each refusal naming
// what is wrong.
func TestValidateName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, want string // want: in the error; "" for a valid name
	}{
		{"orders.public_t-1", ""},
		{strings.Repeat("a", maxNameLen), ""},
		{"", "empty"},
		{".", "not allowed"},
		{"..", "not allowed"},
		{strings.Repeat("a", maxNameLen+1), "over Kafka's limit of 249"},
		{"a b", "outside [a-zA-Z0-9._-]"},
		{"ä", "outside [a-zA-Z0-9._-]"},
	} {
		err := ValidateName(c.name)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("ValidateName(%.20q): %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("ValidateName(%.20q): %v, want an error saying %q", c.name, err, c.want)
		}
		if got := ValidChars(c.name); got != (c.want == "" || !strings.Contains(c.want, "outside")) {
			t.Errorf("ValidChars(%.20q) = %t", c.name, got)
		}
	}
}

// TestCleanupPolicies: each policy cleanup.policy names, in any order and
// spacing.
func TestCleanupPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy       string
		compact, del bool
	}{
		{"", false, false},
		{"delete", false, true},
		{"compact", true, false},
		{"compact,delete", true, true},
		{"delete, compact", true, true},
	} {
		compact, del := CleanupPolicies(map[string]string{"cleanup.policy": c.policy})
		if compact != c.compact || del != c.del {
			t.Errorf("CleanupPolicies(%q) = %t, %t; want %t, %t", c.policy, compact, del, c.compact, c.del)
		}
	}
}
