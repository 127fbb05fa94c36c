package kafkasink

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/encoding/jsonw"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// This file is the annotations: static key/values the sink echoes in
// every record of an event (Config.Annotations), in its value, its
// headers or both (Config.AnnotationsIn).

// AnnotationPlace says where the records carry Config.Annotations.
type AnnotationPlace uint8

// The places. The zero AnnotationPlace is AnnotateValue.
const (
	// AnnotateValue: an "annotations" object in each value, written by
	// the Encoder (see Annotator). A tombstone, which has no value,
	// carries none.
	AnnotateValue AnnotationPlace = iota
	// AnnotateHeaders: one header per annotation on each record of an
	// event (its tombstone and dead-letter record included), after the
	// sink's and the Encoder's own headers. Any Encoder.
	AnnotateHeaders
	// AnnotateBoth: in the value and in the headers.
	AnnotateBoth
)

// String returns "value", "headers" or "both".
func (p AnnotationPlace) String() string {
	switch p {
	case AnnotateValue:
		return "value"
	case AnnotateHeaders:
		return "headers"
	case AnnotateBoth:
		return "both"
	}
	return fmt.Sprintf("annotationplace(%d)", uint8(p))
}

// ParseAnnotationPlace parses the text String returns.
func ParseAnnotationPlace(s string) (AnnotationPlace, error) {
	for _, p := range []AnnotationPlace{AnnotateValue, AnnotateHeaders, AnnotateBoth} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("kafkasink: unknown annotation place %q: want value, headers or both", s)
}

// Annotator is an optional interface of an Encoder that writes
// Config.Annotations into its values. When Config.AnnotationsIn is
// AnnotateValue or AnnotateBoth, New calls Annotate once and writes every
// value with the Encoder it returns; an error is a configuration problem,
// reported with New's others. New refuses those places with an Encoder
// that does not implement Annotator (with a schema'd format, the field
// must be in the schema). JSONEncoder and UpsertEncoder implement it, as
// may an Encoder of another package under its options.
//
// The annotations New passes have been checked (see Config.Annotations);
// Annotate must not modify or keep the map: it makes what it writes from
// it once, so that encoding allocates nothing more per event. Writing the
// keys in sorted order (as the built-in encoders do) keeps the output the
// same from one run to the next.
type Annotator interface {
	Annotate(annotations map[string]string) (Encoder, error)
}

var (
	_ Annotator = JSONEncoder{}
	_ Annotator = UpsertEncoder{}
)

// MaxAnnotationKeyLen is the longest annotation key, in bytes.
const MaxAnnotationKeyLen = 128

// annotationKeyPrefixes are the key prefixes refused as annotation keys,
// because header keys under them belong to someone else, with what they
// are. A key is refused in every place, so that moving annotations from
// the value to the headers never meets a new refusal.
var annotationKeyPrefixes = []struct{ prefix, whose string }{
	{"kafkasink.", "the sink's own headers (kafkasink.id, kafkasink.op, ...)"},
	{"__", "the headers of Kafka's own tools and of Kafka Connect and its connectors (__connect.*, and each connector's own)"},
}

// annotationProblems returns the problems of c's annotations: each key
// must be 1 to MaxAnnotationKeyLen bytes of [a-zA-Z0-9._-] outside the
// reserved prefixes, each value valid UTF-8, and AnnotationsIn known and
// set only with annotations. Keys are reported in sorted order.
func (c *Config) annotationProblems() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if c.AnnotationsIn > AnnotateBoth {
		add("AnnotationsIn %d is unknown: use AnnotateValue, AnnotateHeaders or AnnotateBoth", c.AnnotationsIn)
	}
	if len(c.Annotations) == 0 && c.AnnotationsIn != AnnotateValue {
		add("AnnotationsIn is %s but Annotations is empty: give the annotations, or leave AnnotationsIn unset", c.AnnotationsIn)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Annotations)) {
		switch {
		case k == "":
			add("Annotations has an empty key: give every annotation a name")
		case len(k) > MaxAnnotationKeyLen:
			add("Annotations key %.40q... is %d bytes: use at most %d", k, len(k), MaxAnnotationKeyLen)
		case !topicadmin.ValidChars(k):
			add("Annotations key %q has characters outside [a-zA-Z0-9._-]: use only those, so it is the same name in JSON, in a header and to every tool", k)
		}
		for _, r := range annotationKeyPrefixes {
			if strings.HasPrefix(k, r.prefix) {
				add("Annotations key %q starts with %q, which is reserved for %s: choose another name", k, r.prefix, r.whose)
			}
		}
		if v := c.Annotations[k]; !utf8.ValidString(v) {
			add("Annotations[%q] is not valid UTF-8 (%q): JSON would replace its bad bytes and the header would keep them; give text", k, v)
		}
	}
	return p
}

// annotate gives the records c's annotations, once they are valid: the
// annotated Encoder (AnnotateValue, AnnotateBoth) replaces c.Encoder, and
// c.annotationHeaders holds the headers (AnnotateHeaders, AnnotateBoth).
// It returns why the Encoder cannot take them.
func (c *Config) annotate() []string {
	if len(c.Annotations) == 0 {
		return nil
	}
	if c.AnnotationsIn != AnnotateValue {
		c.annotationHeaders = annotationHeaders(c.Annotations)
	}
	if c.AnnotationsIn == AnnotateHeaders {
		return nil
	}
	a, ok := c.Encoder.(Annotator)
	if !ok {
		return []string{fmt.Sprintf("AnnotationsIn is %s, but the Encoder (%T) does not write annotations into its values (it is no kafkasink.Annotator): "+
			"set AnnotationsIn to AnnotateHeaders to carry them in headers", c.AnnotationsIn, c.Encoder)}
	}
	enc, err := a.Annotate(c.Annotations)
	if err != nil {
		return []string{fmt.Sprintf("AnnotationsIn is %s: %v", c.AnnotationsIn, err)}
	}
	c.Encoder = enc
	return nil
}

// annotationHeaders returns the annotations as record headers, in key
// order. Their values are shared by every record: neither the sink nor
// the client writes to a header value.
func annotationHeaders(annotations map[string]string) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(annotations))
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(annotations[k])})
	}
	return hs
}

// annotationsMember returns the JSON member `,"annotations":{...}` of
// the annotations, keys in sorted order, for an encoder to append to its
// values as it is.
func annotationsMember(annotations map[string]string) string {
	return string(jsonw.AppendStringMap([]byte(`,"annotations":`), annotations))
}

// appendAnnotationHeaders returns the record headers hs (the last
// appended to es.headers) followed by the annotations' headers.
func (es *encoderState) appendAnnotationHeaders(hs, annotations []kgo.RecordHeader) []kgo.RecordHeader {
	if len(annotations) == 0 {
		return hs
	}
	h0 := len(es.headers) - len(hs)
	es.headers = append(es.headers, annotations...)
	return es.headers[h0:len(es.headers):len(es.headers)]
}
