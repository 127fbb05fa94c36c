// Package dbztoast says which form Debezium 3.6.1's PostgreSQL connector
// gives the placeholder of an unchanged TOAST value (a value a change
// under REPLICA IDENTITY DEFAULT does not carry), by the column's type:
// io.debezium.connector.postgresql.UnchangedToastedReplicationMessageColumn
// picks one of UnchangedToastedPlaceholder's values by the type's name.
// debezium.Encoder writes the placeholder in that form, and
// kafkasinkavro.DebeziumEncoder refuses an unchanged value whose form is
// the plain string in a field that cannot hold one; one decision serves
// both.
package dbztoast

// Form is the form of an unchanged TOAST value's placeholder.
type Form uint8

const (
	// String is the placeholder's text: every type Debezium does not
	// single out (text, json, jsonb, xml, and arrays other than those
	// below).
	String Form = iota
	// Bytes is the placeholder's bytes: bytea.
	Bytes
	// TextList is a list of one element, the placeholder's text: arrays
	// of text, varchar, bpchar (char(n)), json and jsonb.
	TextList
	// BytesList is a list of one element, the placeholder's bytes: bytea
	// arrays.
	BytesList
	// IntList is a list of the placeholder's bytes, each as a signed
	// integer (Java's byte): integer, date and bigint arrays.
	IntList
	// UUIDList is a list of one element, the name-based (version 3) UUID
	// of the placeholder's bytes: uuid arrays.
	UUIDList
	// HstoreMap is the map of the placeholder's text to itself: hstore,
	// which Debezium writes (hstore.handling.mode json) as the JSON
	// object's text, {"<placeholder>":"<placeholder>"}.
	HstoreMap
)

// Of returns the form for a column of the type named name (pg_type's
// typname, "_int4" for an int4 array) whose base type, through domains,
// is named base. Debezium matches the column's own type name: an array
// of a domain, or a domain over an array, is the String form.
func Of(name, base string) Form {
	switch name {
	case "_text", "_varchar", "_bpchar", "_json", "_jsonb":
		return TextList
	case "_bytea":
		return BytesList
	case "_int4", "_date", "_int8":
		return IntList
	case "_uuid":
		return UUIDList
	case "hstore":
		return HstoreMap
	}
	if base == "bytea" {
		return Bytes
	}
	return String
}
