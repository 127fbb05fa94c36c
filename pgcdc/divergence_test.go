package pgcdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
)

func TestParseTimelineHistory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, content string
		want          []timelineSwitch
		err           string
	}{
		{"empty", "", nil, ""},
		{"one promotion", "1\t0/3000060\tno recovery target specified\n",
			[]timelineSwitch{{1, 0x3000060, "no recovery target specified"}}, ""},
		{"three promotions, comments, blank lines, no reason", "# made by hand\n1\t0/3000060\tno recovery target specified\n\n2\t0/50000A0\tbefore 2000-01-01\n4\t1/0\n",
			[]timelineSwitch{{1, 0x3000060, "no recovery target specified"}, {2, 0x50000A0, "before 2000-01-01"}, {4, 0x100000000, ""}}, ""},
		{"no switchpoint", "1\n", nil, "want parent timeline, switchpoint LSN and reason"},
		{"bad timeline", "x\t0/1\tr\n", nil, `"x" is not a timeline id`},
		{"timeline zero", "0\t0/1\tr\n", nil, `"0" is not a timeline id`},
		{"bad LSN", "1\tnope\tr\n", nil, "nope"},
		{"timelines out of order", "2\t0/10\tr\n1\t0/20\tr\n", nil, "must ascend"},
		{"switchpoints out of order", "1\t0/20\tr\n2\t0/10\tr\n", nil, "must ascend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseTimelineHistory([]byte(tc.content))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestPlaceCheckpoint(t *testing.T) {
	t.Parallel()
	// Timeline 1 left at 0/3000, 2 at 0/5000, 3 abandoned, 4 at 0/9000;
	// the server is on 5.
	history := []timelineSwitch{{1, 0x3000, ""}, {2, 0x5000, ""}, {4, 0x9000, ""}}
	for _, tc := range []struct {
		name       string
		ckTimeline int32
		ck         kafkasink.LSN
		server     int32
		want       placement
	}{
		{"no timeline recorded", 0, 0x4000, 5, placement{place: placeUnknown}},
		{"same timeline", 5, 0xF000, 5, placement{place: placeSame}},
		{"same timeline, no history", 1, 0x1000, 1, placement{place: placeSame}},
		{"parent, before the switchpoint", 4, 0x8FFF, 5, placement{placeAncestor, 0x9000}},
		{"parent, at the switchpoint", 4, 0x9000, 5, placement{placeDiverged, 0x9000}},
		{"parent, beyond the switchpoint", 4, 0xA000, 5, placement{placeDiverged, 0x9000}},
		{"grandparent, before its switchpoint", 2, 0x4FFF, 5, placement{placeAncestor, 0x5000}},
		{"grandparent, beyond its switchpoint but before the later ones", 2, 0x6000, 5, placement{placeDiverged, 0x5000}},
		{"first timeline, before", 1, 0x2000, 5, placement{placeAncestor, 0x3000}},
		{"first timeline, at", 1, 0x3000, 5, placement{placeDiverged, 0x3000}},
		{"abandoned sibling", 3, 0x5800, 5, placement{place: placeForeign}},
		{"a later timeline: the server is an old primary", 6, 0x1000, 5, placement{place: placeForeign}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := placeCheckpoint(tc.ckTimeline, tc.ck, tc.server, history); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := placeCheckpoint(1, 0x1000, 2, nil); got.place != placeForeign {
		t.Errorf("a server on timeline 2 without a history: got %+v, want placeForeign", got)
	}
}

// TestPlanTimeline pins what Run does with a checkpoint on another
// timeline: goes on when the server has every change in Kafka, and
// otherwise applies Config.SlotGap, naming the range.
func TestPlanTimeline(t *testing.T) {
	t.Parallel()
	id := sourceIdentity{SystemID: "7001", Timeline: 2, Database: "shop", DatabaseOID: 16384, Slot: "s1"}
	on1 := id
	on1.Timeline = 1
	history := []timelineSwitch{{1, 0x3000, "no recovery target specified"}}
	ck := func(lsn kafkasink.LSN) kafkasink.Checkpoint {
		return kafkasink.Checkpoint{Position: kafkasink.Position{LSN: lsn, Index: 1}}
	}
	cur := func(src *sourceIdentity) cursor {
		var c cursor
		c.Source, c.Confirmed, c.LastCommitEnd = src, 0x3500, 0x3430
		return c
	}
	slot := slotState{exists: true, confirmed: 0x2800, walStatus: "reserved", current: 0x3800}
	type want struct {
		refuse          []string // parts of the error; nil to go on
		diverged        bool
		create, drop    bool
		gapFrom, gapTo  kafkasink.LSN
		timelineChanged bool
	}
	for _, tc := range []struct {
		name     string
		gap      SlotGap
		streamed bool
		ck       kafkasink.Checkpoint
		cur      cursor
		slot     slotState
		want     want
	}{
		{"same timeline", 0, false, ck(0x3400), cur(&id), slot, want{}},
		{"promoted with everything", 0, false, ck(0x2F00), cur(&on1), slot, want{timelineChanged: true}},
		{"no timeline recorded: goes on", 0, false, ck(0x3400), cur(&sourceIdentity{SystemID: "7001", Database: "shop", DatabaseOID: 16384, Slot: "s1"}), slot,
			want{timelineChanged: true}},
		{"diverged: refused", 0, false, ck(0x3400), cur(&on1), slot, want{
			refuse: []string{"checkpoint is at 0/3400 on timeline 1", "left timeline 1 at 0/3000", "timeline 2", "from 0/3000 up to 0/3400 (1024 bytes of WAL)",
				"committed at 0/3400 (the last commit the cursor recorded", "ends at 0/3430)", "kafkasink.commit_lsn", "-slot-gap=resnapshot", "-slot-gap=accept"},
			diverged: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"streamed through the server's promotion: goes on", 0, false, ck(0x3400), cur(&on1), slotState{exists: true, confirmed: 0x3500, current: 0x3800},
			want{timelineChanged: true}},
		{"slot lags what was recorded: diverged", 0, false, ck(0x3400), cur(&on1), slotState{exists: true, confirmed: 0x34FF, current: 0x3800},
			want{refuse: []string{"from 0/3000 up to 0/3400"}, diverged: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"slot at what was recorded but invalidated: diverged", 0, false, ck(0x3400), cur(&on1), slotState{exists: true, confirmed: 0x3500, walStatus: "lost", current: 0x3800},
			want{refuse: []string{"from 0/3000 up to 0/3400"}, diverged: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"recorded confirmation below the checkpoint: diverged", 0, false, ck(0x3600), cur(&on1), slotState{exists: true, confirmed: 0x3500, current: 0x3800},
			want{refuse: []string{"from 0/3000 up to 0/3600"}, diverged: true, gapFrom: 0x3000, gapTo: 0x3600}},
		{"diverged at the switchpoint: refused", 0, false, ck(0x3000), cur(&on1), slot, want{
			refuse: []string{"from 0/3000 up to 0/3000"}, diverged: true, gapFrom: 0x3000, gapTo: 0x3000}},
		{"diverged: resnapshot drops and creates the slot", SlotGapResnapshot, false, ck(0x3400), cur(&on1), slot,
			want{diverged: true, create: true, drop: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"diverged: accept keeps the slot", SlotGapAccept, false, ck(0x3400), cur(&on1), slot,
			want{diverged: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"diverged: accept creates a missing slot", SlotGapAccept, false, ck(0x3400), cur(&on1), slotState{current: 0x3800},
			want{diverged: true, create: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"diverged: accept drops an invalidated slot", SlotGapAccept, false, ck(0x3400), cur(&on1), slotState{exists: true, walStatus: "lost", current: 0x3800},
			want{diverged: true, create: true, drop: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"diverged: resnapshot before the server's WAL passed the checkpoint", SlotGapResnapshot, false, ck(0x3400), cur(&on1), slotState{exists: true, current: 0x3400},
			want{refuse: []string{"the server's WAL is only at 0/3400", "pg_switch_wal()"}, diverged: true, gapFrom: 0x3000, gapTo: 0x3400}},
		{"diverged, found at a reconnect: refused whatever SlotGap says", SlotGapAccept, true, ck(0x3400), cur(&on1), slot,
			want{refuse: []string{"while Run was streaming", "from 0/3000 up to 0/3400"}, diverged: true, gapFrom: 0x3000, gapTo: 0x3400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Slot: "s1", CreateSlot: true, SlotGap: tc.gap}
			p := planSource(sourceFacts{cfg: &cfg, streamed: tc.streamed, ck: tc.ck, cur: tc.cur, id: id, slot: tc.slot, history: history})
			w := tc.want
			if w.refuse == nil && p.refuse != nil {
				t.Fatalf("refused: %v", p.refuse)
			}
			for _, part := range w.refuse {
				if p.refuse == nil || !strings.Contains(p.refuse.Error(), part) {
					t.Errorf("refusal %v, want one saying %q", p.refuse, part)
				}
			}
			var se *SourceError
			if w.refuse != nil && (!errors.As(p.refuse, &se) || se.Kind != SourceTimelineDiverged || se.Timeline == nil || !se.Timeline.Diverged) {
				t.Errorf("refusal %#v, want a *SourceError of kind timeline_diverged with its TimelineChange", p.refuse)
			}
			if changed := p.timeline != nil && !p.timeline.Diverged; changed != w.timelineChanged {
				t.Errorf("timeline change without divergence %v, want %v (%+v)", changed, w.timelineChanged, p.timeline)
			}
			if p.create != w.create || p.drop != w.drop {
				t.Errorf("create %v drop %v, want %v %v", p.create, p.drop, w.create, w.drop)
			}
			if !w.diverged {
				if p.gap != nil {
					t.Errorf("a gap %+v, want none", p.gap)
				}
				return
			}
			if p.gap == nil || p.gap.Kind != SourceTimelineDiverged || p.gap.From != w.gapFrom || p.gap.To != w.gapTo || p.gap.Bytes != int64(w.gapTo-w.gapFrom) {
				t.Fatalf("gap %+v, want timeline_diverged %s..%s", p.gap, w.gapFrom, w.gapTo)
			}
			if want := map[bool]SlotGap{true: SlotGapRefuse, false: tc.gap}[p.refuse != nil]; p.gap.Action != want {
				t.Errorf("gap action %v, want %v", p.gap.Action, want)
			}
			if tl := p.gap.Timeline; tl == nil || tl.From != 1 || tl.To != 2 || tl.Switchpoint != 0x3000 || tl.Checkpoint != w.gapTo || tl.LastCommitEnd != 0x3430 {
				t.Errorf("timeline change %+v", tl)
			}
		})
	}
}
