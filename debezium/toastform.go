package debezium

import "github.com/kafkasink/kafkasink"

// This file says which form Debezium 3.6.1's PostgreSQL connector gives
// the placeholder of an unchanged TOAST value (a value a change under
// REPLICA IDENTITY DEFAULT does not carry), by the column's type:
// io.debezium.connector.postgresql.UnchangedToastedReplicationMessageColumn
// picks one of UnchangedToastedPlaceholder's values by the type's name.
// Encoder writes the placeholder in that form (writeUnchanged), and
// kafkasinkavro's Debezium encoder refuses an unchanged value whose form
// is the plain string in a field that cannot hold one
// (PlaceholderIsString); one decision serves both.

// PlaceholderIsString reports whether Encoder writes the placeholder of
// an unchanged TOAST value (UnavailableValuePlaceholder) in a column of
// declared type t as the plain string, as Debezium 3.6.1 does for every
// type it does not single out, rather than in the column's own form:
// bytes for a bytea (through domains), a list for arrays of text,
// varchar, char, json, jsonb, bytea, integer, bigint, date and uuid, a
// map for hstore. A nil t is the string form.
func PlaceholderIsString(t *kafkasink.TypeInfo) bool {
	if t == nil {
		return true
	}
	return toastFormOf(t.Name, declaredBase(t).Name) == toastString
}

// toastForm is the form of an unchanged TOAST value's placeholder.
type toastForm uint8

const (
	// toastString is the placeholder's text: every type Debezium does not
	// single out (text, json, jsonb, xml, and arrays other than those
	// below).
	toastString toastForm = iota
	// toastBytes is the placeholder's bytes: bytea.
	toastBytes
	// toastTextList is a list of one element, the placeholder's text: arrays
	// of text, varchar, bpchar (char(n)), json and jsonb.
	toastTextList
	// toastBytesList is a list of one element, the placeholder's bytes: bytea
	// arrays.
	toastBytesList
	// toastIntList is a list of the placeholder's bytes, each as a signed
	// integer (Java's byte): integer, date and bigint arrays.
	toastIntList
	// toastUUIDList is a list of one element, the name-based (version 3) UUID
	// of the placeholder's bytes: uuid arrays.
	toastUUIDList
	// toastHstoreMap is the map of the placeholder's text to itself: hstore,
	// which Debezium writes (hstore.handling.mode json) as the JSON
	// object's text, {"<placeholder>":"<placeholder>"}.
	toastHstoreMap
)

// toastFormOf returns the form for a column of the type named name (pg_type's
// typname, "_int4" for an int4 array) whose base type, through domains,
// is named base. Debezium matches the column's own type name: an array
// of a domain, or a domain over an array, is the String form.
func toastFormOf(name, base string) toastForm {
	switch name {
	case "_text", "_varchar", "_bpchar", "_json", "_jsonb":
		return toastTextList
	case "_bytea":
		return toastBytesList
	case "_int4", "_date", "_int8":
		return toastIntList
	case "_uuid":
		return toastUUIDList
	case "hstore":
		return toastHstoreMap
	}
	if base == "bytea" {
		return toastBytes
	}
	return toastString
}
