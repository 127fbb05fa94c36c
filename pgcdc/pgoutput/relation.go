package pgoutput

import (
	"slices"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
)

// relationColumn is what describes one column of an Event.Relation: its
// name, its type as pg_attribute declares it (atttypid, atttypmod),
// whether it is NOT NULL, and its DEFAULT expression.
type relationColumn struct {
	name    string
	oid     uint32
	typmod  int32
	notNull bool
	def     string // pg_get_expr of its pg_attrdef row; "" when none
}

// typeKey names a declared type: the same type with another modifier
// (numeric(12,3) and numeric(40,5)) is another TypeInfo.
type typeKey struct {
	oid    uint32
	typmod int32
}

// builtinTypeNames are the typnames of the built-in types pgx does not
// register, for decoders without a catalog to ask (NewDecoder): with one,
// resolve reads every type pgx does not know from pg_type.
var builtinTypeNames = map[uint32]string{790: "money", 791: "_money", 1266: "timetz", 1270: "_timetz"}

// relation describes cols as an Event.Relation. The converter must have
// resolved their types first: the names of types pgx does not know come
// from the catalog. TypeInfos are shared among relations, so one table
// version costs one Relation and its columns, and no event costs anything.
func (c *valueConverter) relation(cols []relationColumn) *kafkasink.Relation {
	rel := &kafkasink.Relation{Columns: make([]kafkasink.ColumnInfo, len(cols))}
	for i, col := range cols {
		rel.Columns[i] = kafkasink.ColumnInfo{Name: col.name, Type: c.typeInfo(col.oid, col.typmod, 0), NotNull: col.notNull, Default: col.def}
	}
	return rel
}

// sameRelation reports whether a and b describe the same columns. Their
// TypeInfos come from the converter's cache, so an unchanged type is the
// same pointer and a redefined one is not.
func sameRelation(a, b *kafkasink.Relation) bool {
	return a != nil && b != nil && slices.Equal(a.Columns, b.Columns)
}

// typeInfo returns the TypeInfo of type oid with modifier typmod, from the
// converter's cache or made and cached. depth bounds the descent through
// domains and arrays, which the catalog cannot make cyclic but a type
// changed between lookups might.
func (c *valueConverter) typeInfo(oid uint32, typmod int32, depth int) *kafkasink.TypeInfo {
	k := typeKey{oid, typmod}
	if t, ok := c.typeInfos[k]; ok {
		return t
	}
	t := &kafkasink.TypeInfo{OID: oid, Modifier: typmod}
	if depth < maxArrayDims {
		if pt, ok := c.types.TypeForOID(oid); ok {
			t.Name, t.Kind = pt.Name, 'b'
			switch pt.Codec.(type) {
			case *pgtype.RangeCodec:
				t.Kind = 'r'
			case *pgtype.MultirangeCodec:
				t.Kind = 'm'
			}
			if ac, ok := pt.Codec.(*pgtype.ArrayCodec); ok && ac.ElementType != nil {
				t.Elem = c.typeInfo(ac.ElementType.OID, typmod, depth+1)
			}
		} else if ct, ok := c.custom[oid]; ok {
			t.Name, t.Kind, t.Labels = ct.name, ct.kind, ct.labels
			switch {
			case ct.base != 0:
				t.Base = c.typeInfo(ct.base, ct.typmod, depth+1)
			case ct.array:
				t.Elem = c.typeInfo(ct.elem, typmod, depth+1)
			}
		}
	}
	if t.Name == "" {
		if t.Name = builtinTypeNames[oid]; t.Name != "" {
			t.Kind = 'b'
		}
	}
	if c.typeInfos == nil {
		c.typeInfos = make(map[typeKey]*kafkasink.TypeInfo)
	}
	c.typeInfos[k] = t
	return t
}
