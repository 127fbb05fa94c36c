package pgcdc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/kafkasink/kafkasink"
)

// timelineSwitch is one line of a timeline history file: the server's
// history left timeline Parent at Switchpoint, where the next timeline
// of the history begins.
type timelineSwitch struct {
	Parent      int32
	Switchpoint kafkasink.LSN
	Reason      string
}

// parseTimelineHistory reads the content of a timeline history file (as
// TIMELINE_HISTORY returns it): one "parentTLI<TAB>switchpoint<TAB>reason"
// line per ancestor, oldest first. Blank lines and lines starting with
// '#' are skipped, as PostgreSQL's own reader skips them.
func parseTimelineHistory(content []byte) ([]timelineSwitch, error) {
	var out []timelineSwitch
	sc := bufio.NewScanner(bytes.NewReader(content))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.SplitN(line, "\t", 3)
		if len(fields) < 2 {
			return nil, fmt.Errorf("pgcdc: timeline history line %d %q: want parent timeline, switchpoint LSN and reason, separated by tabs", n, line)
		}
		tli, err := strconv.ParseUint(strings.TrimSpace(fields[0]), 10, 32)
		if err != nil || tli == 0 || tli > 1<<31-1 {
			return nil, fmt.Errorf("pgcdc: timeline history line %d %q: %q is not a timeline id", n, line, fields[0])
		}
		lsn, err := kafkasink.ParseLSN(strings.TrimSpace(fields[1]))
		if err != nil {
			return nil, fmt.Errorf("pgcdc: timeline history line %d %q: %w", n, line, err)
		}
		sw := timelineSwitch{Parent: int32(tli), Switchpoint: lsn}
		if len(fields) == 3 {
			sw.Reason = strings.TrimSpace(fields[2])
		}
		if k := len(out); k > 0 && (sw.Parent <= out[k-1].Parent || sw.Switchpoint < out[k-1].Switchpoint) {
			return nil, fmt.Errorf("pgcdc: timeline history line %d %q: timelines and switchpoints must ascend (the line before is timeline %d at %s)",
				n, line, out[k-1].Parent, out[k-1].Switchpoint)
		}
		out = append(out, sw)
	}
	return out, sc.Err()
}

// historyPlace says where a checkpoint stands on the server's timeline
// history.
type historyPlace int

const (
	// placeUnknown: the checkpoint records no timeline (an earlier
	// version, or nothing delivered), so it cannot be placed.
	placeUnknown historyPlace = iota
	// placeSame: the checkpoint was written on the server's timeline.
	placeSame
	// placeAncestor: the checkpoint's timeline is an ancestor of the
	// server's, and the checkpoint lies before the switchpoint where
	// the history left it: the server has every change in Kafka.
	placeAncestor
	// placeDiverged: the checkpoint's timeline is an ancestor, but the
	// checkpoint lies at or after the switchpoint: the changes from the
	// switchpoint up to the checkpoint are in Kafka and were never on
	// the server's timeline.
	placeDiverged
	// placeForeign: the checkpoint's timeline is not in the server's
	// history at all (a sibling timeline, or a later one: the server is
	// an old primary that was not followed).
	placeForeign
)

// placement is placeCheckpoint's verdict; switchpoint is where the
// history left the checkpoint's timeline (placeAncestor and
// placeDiverged only).
type placement struct {
	place       historyPlace
	switchpoint kafkasink.LSN
}

// placeCheckpoint places the checkpoint (the commit LSN of the last
// change in Kafka, written on timeline ckTimeline) on the history of the
// server's timeline. The switchpoint is the end of the last WAL record
// the promoted server replayed from the old timeline, so a commit record
// that starts before it was replayed whole, and one that starts at it or
// later was never on the server: the comparison is strict.
func placeCheckpoint(ckTimeline int32, ckLSN kafkasink.LSN, serverTimeline int32, history []timelineSwitch) placement {
	switch {
	case ckTimeline <= 0:
		return placement{place: placeUnknown}
	case ckTimeline == serverTimeline:
		return placement{place: placeSame}
	}
	for _, sw := range history {
		if sw.Parent != ckTimeline {
			continue
		}
		if ckLSN < sw.Switchpoint {
			return placement{place: placeAncestor, switchpoint: sw.Switchpoint}
		}
		return placement{place: placeDiverged, switchpoint: sw.Switchpoint}
	}
	return placement{place: placeForeign}
}

// readTimelineHistory asks the server for the history of its timeline;
// timeline 1 has none.
func readTimelineHistory(ctx context.Context, cfg *Config, timeline int32) ([]timelineSwitch, error) {
	if timeline <= 1 {
		return nil, nil
	}
	conn, err := cfg.connectReplication(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn(conn)
	res, err := pglogrepl.TimelineHistory(ctx, conn, timeline)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: TIMELINE_HISTORY %d: %w", timeline, err)
	}
	return parseTimelineHistory(res.Content)
}

// timelineHistory reads the server's timeline history when Run needs
// it: the checkpoint records a timeline and the server is on another.
func (r *runner) timelineHistory(ctx context.Context, f sourceFacts) ([]timelineSwitch, error) {
	if f.ck.IsZero() || f.cur.Source == nil || f.cur.Source.Timeline == 0 || f.cur.Source.Timeline == f.id.Timeline {
		return nil, nil
	}
	return readTimelineHistory(ctx, r.cfg, f.id.Timeline)
}
