package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/pgcdc"
)

// TestFailoverNote pins what /readyz's body says of the slot's copy on
// -failover-standby: nothing without it, the copy's position when it is
// synchronised, the reason when it is not.
func TestFailoverNote(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		s    pgcdc.StandbySync
		want string
	}{
		{"no -failover-standby", pgcdc.StandbySync{}, ""},
		{"synchronised", pgcdc.StandbySync{Checked: now, Synced: true, Confirmed: 0x1000}, "; failover slot synchronised to the standby (at 0/1000)"},
		{"no copy", pgcdc.StandbySync{Checked: now, Problem: "the standby has no copy of the slot (yet)"}, "; a failover to the standby now is not safe: the standby has no copy of the slot (yet)"},
	} {
		if got := failoverNote(tc.s); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	st := newRunStatus(pgcdc.RunStats{FailoverSlot: true, StandbySync: pgcdc.StandbySync{Checked: now, Synced: true, Confirmed: 0x1000}})
	if !st.FailoverSlot || st.StandbySync == nil || !st.StandbySync.Synced || st.StandbySync.Confirmed != "0/1000" || !strings.Contains(st.StandbySync.Checked, "T") {
		t.Errorf("/status run: %+v, standby_sync %+v", st, st.StandbySync)
	}
}
