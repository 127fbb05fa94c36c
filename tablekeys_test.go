package kafkasink_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
)

// TableKeys names tables as ParseTableName reads them, and Check reports
// what would name no table or no column.
func TestTableKeys(t *testing.T) {
	k := kafkasink.TableKeys{"shop.orders": {"tenant", "id"}, `public."a.b"`: {"x"}}
	for _, tc := range []struct {
		schema, table string
		want          []string
		found         bool
	}{
		{"shop", "orders", []string{"tenant", "id"}, true},
		{"public", "a.b", []string{"x"}, true},
		{"public", "orders", nil, false},
		{"shop", "Orders", nil, false},
	} {
		got, found := k.Columns(tc.schema, tc.table)
		if found != tc.found || !slices.Equal(got, tc.want) {
			t.Errorf("Columns(%s, %s) = %q, %t; want %q, %t", tc.schema, tc.table, got, found, tc.want, tc.found)
		}
	}
	if p := k.Check("KeyColumns"); p != nil {
		t.Errorf("Check of valid keys: %q", p)
	}
	bad := kafkasink.TableKeys{"orders": {"id"}, "a.b.c": {"id"}, "s.t": {}, `s."t"`: {"id"}, "s.u": {""}}
	got := strings.Join(bad.Check("KeyColumns"), "\n")
	for _, want := range []string{`"orders" has no schema`, `a.b.c`, `KeyColumns has two keys for table s.t`,
		`KeyColumns["s.t"] needs at least one non-empty column name`, `KeyColumns["s.u"] needs at least one non-empty column name`} {
		if !strings.Contains(got, want) {
			t.Errorf("Check problems:\n%s\nwant one saying %s", got, want)
		}
	}
}
