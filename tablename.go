package kafkasink

import (
	"github.com/kafkasink/kafkasink/internal/tablename"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// ParseTableName parses a table name as Topics.Routes and pgcdc's
// Config.Tables take it: "schema.table", or "table" alone, for which
// schema is "".
//
// A part is taken literally, without case folding: Orders is the table
// PostgreSQL stores as Orders (which SQL would have to quote, and
// TableName does). A part that contains a dot or a double quote, or
// starts or ends with a space, must be written in double quotes, with a
// double quote inside doubled, as in SQL: public."a.b", "a.b".c,
// "say ""hi""".t. Any part may be quoted. So "a.b".c and a."b.c" name
// different tables, and an unquoted name with more than one dot, such as
// a.b.c, is refused as ambiguous.
func ParseTableName(s string) (schema, table string, err error) {
	return tablename.Parse(s)
}

// TableName returns schema.table in the form ParseTableName reads; an
// empty schema is left out. A part is quoted unless it is a plain SQL
// identifier (lower-case letters, digits and underscores, not starting
// with a digit), as PostgreSQL's quote_ident does, so the name reads the
// same in SQL, and "a.b".c and a."b.c" stay distinct in error messages.
func TableName(schema, table string) string {
	return tablename.Format(schema, table)
}

// ValidateTopicName returns why name is not a valid Kafka topic name
// (empty, "." or "..", over 249 bytes, or with characters outside
// [a-zA-Z0-9._-]), or nil, for an Encoder's Validator that names a topic
// of its own.
func ValidateTopicName(name string) error {
	return topicadmin.ValidateName(name)
}
