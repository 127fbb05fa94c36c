package pgoutput

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// TestParseMessageMatchesPglogrepl: every message parseMessage accepts, the
// seeds and random corruptions of them, reads as pglogrepl.ParseV2 reads it
// (which parsed them before the Decoder parsed once), field by field; and no
// corruption makes it panic.
func TestParseMessageMatchesPglogrepl(t *testing.T) {
	t.Parallel()
	seeds := [][]byte{
		pgoutputmsg.Begin(9, t0, 1), pgoutputmsg.Commit(9, 10, t0), pgoutputmsg.Origin("o"),
		pgoutputmsg.Relation(0, 2, "s", "u", 'f', pgoutputmsg.Key("a", pgtype.TextOID), pgoutputmsg.Col("b", pgtype.Int4OID)),
		pgoutputmsg.Relation(5, 2, "s", "u", 'd', pgoutputmsg.Key("a", pgtype.TextOID)),
		pgoutputmsg.Type(0, 50000, "public", "mood"), pgoutputmsg.Type(5, 50000, "public", "mood"),
		pgoutputmsg.Truncate(0, 3, 1, 2), pgoutputmsg.Truncate(5, 0, 7),
		pgoutputmsg.Logical(0, false, 3, "p", "c"), pgoutputmsg.Logical(6, true, 3, "p", ""),
		pgoutputmsg.StreamStart(5, true), pgoutputmsg.StreamStart(5, false), pgoutputmsg.StreamStop(),
		pgoutputmsg.StreamCommit(5, 20, 21, t0), pgoutputmsg.StreamAbort(5, 6),
	}
	r := rand.New(rand.NewPCG(25, 5))
	parsed := 0
	for i := range 200000 {
		data := seeds[i%len(seeds)]
		if i >= len(seeds) {
			data = append([]byte(nil), data...)
			for range 1 + r.IntN(2) {
				if len(data) > 1 {
					data[1+r.IntN(len(data)-1)] = byte(r.Uint32())
				}
			}
		}
		for _, inStream := range []bool{false, true} {
			msg, err := parseMessage(data, inStream, 2)
			if err != nil {
				if i < len(seeds) && inStream == hasXid(seeds[i]) {
					t.Fatalf("seed %d (%q): %v", i, data[0], err)
				}
				continue
			}
			parsed++
			want, err := pglogrepl.ParseV2(data, inStream)
			if err != nil {
				t.Fatalf("%q (in stream %v): parseMessage accepts what pglogrepl refuses: %v", data, inStream, err)
			}
			if got := fromPglogrepl(want); !reflect.DeepEqual(msg, got) {
				t.Fatalf("%q (in stream %v):\nparseMessage %#v\npglogrepl    %#v", data, inStream, msg, got)
			}
		}
	}
	if parsed < 100000 {
		t.Fatalf("only %d messages parsed: the test compares too little", parsed)
	}
}

// hasXid reports whether a seed was built for a stream block (with a
// transaction id): those that take one were built with a non-zero one.
func hasXid(data []byte) bool {
	switch data[0] {
	case 'R', 'Y':
		return len(data) > 5 && data[4] == 5
	case 'T':
		return data[4] == 5
	case 'M':
		return data[1] == 0 && data[4] == 6
	}
	return false
}

// fromPglogrepl converts a message pglogrepl parsed into parseMessage's.
func fromPglogrepl(m pglogrepl.Message) message {
	switch m := m.(type) {
	case *pglogrepl.BeginMessage:
		return &beginMsg{finalLSN: kafkasink.LSN(m.FinalLSN), commit: m.CommitTime, xid: m.Xid}
	case *pglogrepl.CommitMessage:
		return &commitMsg{commitLSN: kafkasink.LSN(m.CommitLSN), endLSN: kafkasink.LSN(m.TransactionEndLSN), commit: m.CommitTime}
	case *pglogrepl.OriginMessage:
		return &originMsg{name: m.Name}
	case *pglogrepl.RelationMessageV2:
		r := &relationMsg{xid: m.Xid, oid: m.RelationID, namespace: m.Namespace, name: m.RelationName, identity: m.ReplicaIdentity}
		for _, c := range m.Columns {
			r.columns = append(r.columns, relationMsgColumn{flags: c.Flags, name: c.Name, oid: c.DataType, typmod: c.TypeModifier})
		}
		return r
	case *pglogrepl.TypeMessageV2:
		return &typeDefMsg{xid: m.Xid, oid: m.DataType, namespace: m.Namespace, name: m.Name}
	case *pglogrepl.TruncateMessageV2:
		return &truncateMsg{xid: m.Xid, options: m.Option, relations: m.RelationIDs}
	case *pglogrepl.LogicalDecodingMessageV2:
		return &logicalMsg{xid: m.Xid, transactional: m.Transactional, lsn: kafkasink.LSN(m.LSN), prefix: m.Prefix, content: m.Content}
	case *pglogrepl.StreamStartMessageV2:
		return &streamStartMsg{xid: m.Xid, first: m.FirstSegment == 1}
	case *pglogrepl.StreamStopMessageV2:
		return &streamStopMsg{}
	case *pglogrepl.StreamCommitMessageV2:
		return &streamCommitMsg{xid: m.Xid, commitLSN: kafkasink.LSN(m.CommitLSN), endLSN: kafkasink.LSN(m.TransactionEndLSN), commit: m.CommitTime}
	case *pglogrepl.StreamAbortMessageV2:
		return &streamAbortMsg{xid: m.Xid, subXid: m.SubXid}
	}
	return nil
}
