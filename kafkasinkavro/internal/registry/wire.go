package registry

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// AppendHeader appends the Confluent wire format's header: magic byte 0,
// then the schema id in 4 bytes, big-endian.
func AppendHeader(dst []byte, id int) []byte {
	return append(dst, 0, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// isWire reports whether b starts as the Confluent wire format does, with
// the magic byte 0. A key the sink writes without a schema (a truncate's,
// or that of a table without key columns) is text that never does.
func isWire(b []byte) bool { return len(b) > 0 && b[0] == 0 }

// Transcode returns a copy of r, a record a decoder's encoder wrote, with
// its value and key decoded by value and key; pkg names the decoder's
// package in errors, which name the record. A null value stays null, and
// so does a key not in the wire format: the sink writes a truncate's key,
// and that of a table without key columns, as it does without this
// module's encoders.
func Transcode(ctx context.Context, r *kgo.Record, pkg string, value, key func(context.Context, []byte) ([]byte, error)) (*kgo.Record, error) {
	out := *r
	var err error
	if r.Value != nil {
		if out.Value, err = value(ctx, r.Value); err != nil {
			return nil, fmt.Errorf("%s: record %s[%d]@%d: value: %w", pkg, r.Topic, r.Partition, r.Offset, err)
		}
	}
	if isWire(r.Key) {
		if out.Key, err = key(ctx, r.Key); err != nil {
			return nil, fmt.Errorf("%s: record %s[%d]@%d: key: %w", pkg, r.Topic, r.Partition, r.Offset, err)
		}
	}
	return &out, nil
}

// Schemas are the schemas of one type that a decoder read records of, by
// id, each parsed once: the schema of a Schema Registry's id never
// changes, so the steady state makes no registry call. It is safe for
// concurrent use.
type Schemas[T any] struct {
	registry *sr.Client
	typ      sr.SchemaType
	parse    func(text string) (T, error)

	mu     sync.Mutex
	parsed map[int]T
}

// NewSchemas returns the Schemas of type typ in registry, each made ready
// for decoding by parse.
func NewSchemas[T any](registry *sr.Client, typ sr.SchemaType, parse func(text string) (T, error)) *Schemas[T] {
	return &Schemas[T]{registry: registry, typ: typ, parse: parse, parsed: make(map[int]T)}
}

// Read reads the Confluent wire format's header of b and returns the
// parsed schema of its id and the payload after the header. It refuses
// b without the header, and an id whose schema is of another type (a
// record another serializer wrote).
func (s *Schemas[T]) Read(ctx context.Context, b []byte) (T, []byte, error) {
	var none T
	if len(b) < 5 || !isWire(b) {
		return none, nil, fmt.Errorf("not the Confluent wire format (a zero byte, a 4-byte schema id, the %s payload): % x", s.typ, b[:min(len(b), 8)])
	}
	id := int(binary.BigEndian.Uint32(b[1:5]))
	s.mu.Lock()
	v, ok := s.parsed[id]
	s.mu.Unlock()
	if ok {
		return v, b[5:], nil
	}
	schema, err := s.registry.SchemaByID(ctx, id)
	if err != nil {
		return none, nil, fmt.Errorf("fetching schema %d from the Schema Registry: %w", id, err)
	}
	if schema.Type != s.typ {
		return none, nil, fmt.Errorf("schema %d is of type %s, not %s: the record was written by another serializer", id, schema.Type, s.typ)
	}
	if v, err = s.parse(schema.Schema); err != nil {
		return none, nil, fmt.Errorf("schema %d: %w", id, err)
	}
	s.mu.Lock()
	s.parsed[id] = v
	s.mu.Unlock()
	return v, b[5:], nil
}
