package pgcdc

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestTruncateOptionsReachKafka runs TRUNCATE with and without CASCADE and
// RESTART IDENTITY and checks that each table's truncate record carries
// the options of the statement that emptied it.
func TestTruncateOptionsReachKafka(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	parent, child := e.name+"_parent", e.name+"_child"
	e.exec("CREATE TABLE " + parent + " (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY)")
	e.exec("CREATE TABLE " + child + " (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, parent int REFERENCES " + parent + ")")
	t.Cleanup(func() { e.exec("DROP TABLE IF EXISTS " + child) }) // before the parent
	sink := e.newSink(e.name)
	_, done := start(t, e.config("public."+parent, "public."+child), sink)
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })

	type options struct {
		Cascade         bool `json:"cascade"`
		RestartIdentity bool `json:"restart_identity"`
	}
	want := map[string][]options{}
	for _, st := range []struct {
		sql    string
		tables []string
		opts   options
	}{
		{"TRUNCATE " + parent + " CASCADE", []string{parent, child}, options{Cascade: true}},
		{"TRUNCATE " + child + " RESTART IDENTITY", []string{child}, options{RestartIdentity: true}},
		{"TRUNCATE " + parent + ", " + child, []string{parent, child}, options{}},
		{"TRUNCATE " + parent + " RESTART IDENTITY CASCADE", []string{parent, child}, options{true, true}},
	} {
		e.exec("INSERT INTO " + parent + " DEFAULT VALUES")
		e.exec(st.sql)
		for _, tb := range st.tables {
			want[tb] = append(want[tb], st.opts)
		}
	}
	e.exec("INSERT INTO " + child + " DEFAULT VALUES")
	var childID int
	e.mu.Lock()
	err := e.db.QueryRow(t.Context(), "SELECT id FROM "+child).Scan(&childID)
	e.mu.Unlock()
	if err != nil || childID != 1 {
		t.Fatalf("the child's identity after RESTART IDENTITY is %d (%v), want 1: the statements did not do what the test expects", childID, err)
	}

	for _, tb := range []string{parent, child} {
		var got []options
		waitFor(t, 30*time.Second, "the truncates of "+tb, done, func() bool {
			got = got[:0]
			// Truncates are keyed by event id, so they spread over the
			// partitions: put them back in position order.
			type truncRecord struct {
				ID       string   `json:"id"`
				Op       string   `json:"op"`
				Truncate *options `json:"truncate"`
			}
			var recs []truncRecord
			for _, r := range sinktest.ReadCommitted(t, e.brokers, "t.public."+tb) {
				var v truncRecord
				if err := json.Unmarshal(r.Value, &v); err != nil {
					t.Fatal(err)
				}
				recs = append(recs, v)
			}
			slices.SortFunc(recs, func(a, b truncRecord) int {
				pa, _ := kafkasink.ParsePosition(a.ID)
				pb, _ := kafkasink.ParsePosition(b.ID)
				return pa.Compare(pb)
			})
			for _, v := range recs {
				switch {
				case v.Op == "truncate" && v.Truncate == nil:
					t.Fatalf("%s: truncate record %s without options", tb, v.ID)
				case v.Op == "truncate":
					got = append(got, *v.Truncate)
				case v.Truncate != nil:
					t.Fatalf("%s: %s record %s with truncate options", tb, v.Op, v.ID)
				}
			}
			return len(got) >= len(want[tb])
		})
		if !slices.Equal(got, want[tb]) {
			t.Errorf("%s: truncate options %+v in Kafka, the statements ran %+v", tb, got, want[tb])
		}
	}
}
