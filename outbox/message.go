package outbox

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kafkasink/kafkasink"
)

// Message is one event for Kafka, written by Emit inside the caller's
// transaction and delivered to Topic once that transaction commits.
type Message struct {
	// Topic is the Kafka topic to deliver to; required, and a valid Kafka
	// topic name: at most 249 bytes of [a-zA-Z0-9._-], not "." or "..".
	// Whether the pipeline may write to it is the pipeline's allow-list
	// (pgcdc's Config.Outbox); a topic outside it is dead-lettered.
	Topic string
	// Key is the record key; nil writes a null key (partition 0). It must
	// be text: valid UTF-8 without NUL bytes (see ErrNotText).
	Key []byte
	// Value is the record value, any bytes; nil writes a null value (a
	// tombstone on a compacted topic).
	Value []byte
	// Headers are the record headers, in order; names may repeat.
	Headers []Header
}

// Header is a record header. Name must be non-empty text and must not
// start with "kafkasink.", which the sink's own headers use; Value must
// be text (see ErrNotText).
type Header struct {
	Name  string
	Value []byte
}

// Limits.
const (
	// DefaultMaxBytes is Emitter.MaxBytes's default: the size of key,
	// value and header names and values together that fits Kafka's
	// default message.max.bytes (1048588) and the sink's default
	// Config.MaxRecordBytes (1000012) with room for the sink's headers.
	DefaultMaxBytes = 1000000
	// reservedHeaderPrefix starts the sink's own header names.
	reservedHeaderPrefix = "kafkasink."
)

// The errors Emit returns for a message it refuses, wrapped in a
// *MessageError naming the field; test with errors.Is.
var (
	// ErrNoTopic: Message.Topic is empty.
	ErrNoTopic = errors.New("outbox: message has no topic")
	// ErrBadTopic: Message.Topic is not a valid Kafka topic name.
	ErrBadTopic = errors.New("outbox: invalid topic name")
	// ErrTooLarge: key, value and headers exceed the Emitter's MaxBytes.
	ErrTooLarge = errors.New("outbox: message too large")
	// ErrNotText: a key, header name or header value is not text (valid
	// UTF-8 without NUL bytes), the one form every language, JSON and
	// PostgreSQL's text type carry unchanged.
	ErrNotText = errors.New("outbox: not text (valid UTF-8 without NUL bytes)")
	// ErrBadHeader: a header name is empty or reserved for the sink.
	ErrBadHeader = errors.New("outbox: invalid header name")
)

// MessageError is a message Emit refuses: Field names what is wrong
// ("topic", "key", "value", "headers[2].name"), Err is one of the
// sentinels above.
type MessageError struct {
	Topic string
	Field string
	Err   error
	// Fix says what to do about it.
	Fix string
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("%v: %s of a message for topic %q; %s", e.Err, e.Field, e.Topic, e.Fix)
}

func (e *MessageError) Unwrap() error { return e.Err }

// validate checks m against the format's rules and maxBytes; the first
// problem is the error.
func (m *Message) validate(maxBytes int) error {
	refuse := func(field string, err error, fix string) error {
		return &MessageError{Topic: m.Topic, Field: field, Err: err, Fix: fix}
	}
	if m.Topic == "" {
		return refuse("topic", ErrNoTopic, "set Message.Topic")
	}
	if err := kafkasink.ValidateTopicName(m.Topic); err != nil {
		return refuse("topic", ErrBadTopic, err.Error()+": Kafka topic names are 1 to 249 ASCII letters, digits, '.', '_' and '-'")
	}
	if !isText(m.Key) {
		return refuse("key", ErrNotText, "give a text key, or encode a binary key as text (hex or base64) yourself")
	}
	size := len(m.Key) + len(m.Value)
	for i, h := range m.Headers {
		field := fmt.Sprintf("headers[%d]", i)
		switch {
		case h.Name == "":
			return refuse(field+".name", ErrBadHeader, "give the header a name")
		case strings.HasPrefix(h.Name, reservedHeaderPrefix):
			return refuse(field+".name", ErrBadHeader, fmt.Sprintf("%q: names starting with %q are the sink's own headers; choose another name", h.Name, reservedHeaderPrefix))
		case !isText([]byte(h.Name)):
			return refuse(field+".name", ErrNotText, "give a text name")
		case !isText(h.Value):
			return refuse(field+".value", ErrNotText, "encode a binary header value as text (hex or base64) yourself")
		}
		size += len(h.Name) + len(h.Value)
	}
	if size > maxBytes {
		return refuse("value", ErrTooLarge, fmt.Sprintf("key, value and headers are %d bytes, above the limit of %d (Emitter.MaxBytes); "+
			"store large content elsewhere and send a reference, or raise the limit together with the topic's max.message.bytes and the sink's max record bytes", size, maxBytes))
	}
	return nil
}

// isText reports whether b is valid UTF-8 without NUL bytes.
func isText(b []byte) bool {
	return utf8.Valid(b) && !strings.ContainsRune(string(b), 0)
}
