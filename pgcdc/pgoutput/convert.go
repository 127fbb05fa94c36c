package pgoutput

import "github.com/kafkasink/kafkasink"

// Values converts column values from their text form, and describes
// tables, as a Decoder does, for a reader of the same tables by other
// means: pgcdc's snapshot reads them with SELECT, so that its rows and the
// stream's changes carry the same values and the same Event.Relation.
//
// A Values is not safe for concurrent use.
type Values struct {
	conv *valueConverter
}

// NewValues returns a Values that asks describe about the types pgx does
// not know (see Catalog.Type), or that keeps their text when describe is
// nil. It asks at Relation only: the values of a composite type changed
// since are converted by its description of then.
func NewValues(describe func(oid uint32) (CatalogType, bool, error)) *Values {
	conv := newValueConverter()
	if describe != nil {
		conv.describe = func(oid uint32) (customType, bool, error) {
			t, found, err := describe(oid)
			return t.custom(), found, err
		}
	}
	return &Values{conv: conv}
}

// Column describes one column of a table for Values.Relation: its name,
// its type as pg_attribute declares it (atttypid, atttypmod), whether it
// is NOT NULL, and its DEFAULT expression.
type Column struct {
	Name    string
	OID     uint32
	Typmod  int32
	NotNull bool
	Default string // "" when none
}

// Relation describes a table with columns cols as Event.Relation, after
// looking up the types pgx does not know. Its error is describe's,
// unchanged. TypeInfos are shared among the relations one Values
// describes.
func (v *Values) Relation(cols []Column) (*kafkasink.Relation, error) {
	seen := make(map[uint32]bool)
	for _, c := range cols {
		if err := v.conv.resolve(c.OID, seen); err != nil {
			return nil, err
		}
	}
	rc := make([]relationColumn, len(cols))
	for i, c := range cols {
		rc[i] = relationColumn{name: c.Name, oid: c.OID, typmod: c.Typmod, notNull: c.NotNull, def: c.Default}
	}
	return v.conv.relation(rc), nil
}

// Text converts the text form of a value of the type with OID oid, as
// described at the last Relation, into the Go value an Event carries.
func (v *Values) Text(oid uint32, src []byte) (any, error) { return v.conv.text(oid, src) }
