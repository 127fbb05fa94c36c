package kafkasink

// Relation describes the table an event belongs to as the source declared
// it when the change was captured: every column in table order, with its
// type. Encoders whose output depends on declared types read it
// (an Encoder that renders a numeric by its scale, a time by its
// precision, a delete's before image with every column); the others
// ignore it. A source shares one *Relation among all events of one
// version of a table, so encoders must not modify it. nil when the source
// does not describe its tables (events built by hand).
type Relation struct {
	Columns []ColumnInfo // in table order
}

// Column returns the column named name and whether the relation has it.
func (r *Relation) Column(name string) (*ColumnInfo, bool) {
	if r == nil {
		return nil, false
	}
	for i := range r.Columns {
		if r.Columns[i].Name == name {
			return &r.Columns[i], true
		}
	}
	return nil, false
}

// ColumnInfo is one column of a Relation.
type ColumnInfo struct {
	Name    string    // the column's name, as in Column.Name
	Type    *TypeInfo // its declared type; never nil in a Relation
	NotNull bool      // declared NOT NULL (or part of the primary key)
	// Default is the column's DEFAULT expression as the source prints it
	// (PostgreSQL: pg_get_expr of pg_attrdef, such as "42",
	// "'hello'::text", "now()", "nextval('s'::regclass)"); "" when it has
	// none, for an Encoder that declares it in the column's schema. A
	// string, so that ColumnInfo stays comparable.
	Default string
}

// TypeInfo is a type as the source database declares it. For PostgreSQL:
// the pg_type row and, for a column, its atttypmod.
type TypeInfo struct {
	// Name is the type's name as pg_type stores it (typname): "int4",
	// "numeric", "timestamptz", "_int4" for an int4 array, a domain's or
	// an enum's own name.
	Name string
	// OID is the type's oid in the source database.
	OID uint32
	// Modifier is the type modifier (atttypmod, or a domain's typtypmod):
	// a numeric's precision and scale, a time's fractional precision, a
	// bit or varchar length, encoded as PostgreSQL encodes it; -1 when
	// the declaration has none.
	Modifier int32
	// Elem is an array's element type (with the column's modifier); nil
	// for other types.
	Elem *TypeInfo
	// Base is a domain's base type (with the domain's modifier); nil for
	// other types. Values of a domain are converted as its base type.
	Base *TypeInfo
	// Kind is the type's category as pg_type.typtype has it: 'b' base
	// (arrays included), 'c' composite, 'd' domain, 'e' enum, 'r' range,
	// 'm' multirange, 'p' pseudo; 0 when the source does not say.
	Kind byte
	// Labels are an enum's labels in their declared order (pg_enum), as
	// for an Encoder that declares them in a schema; nil for other types.
	Labels []string
}
