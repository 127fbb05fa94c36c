package kafkasink

import (
	"fmt"

	"github.com/kafkasink/kafkasink/internal/annotation"
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

// annotationProblems returns the problems of c's Annotations and
// AnnotationsIn, by the rules their docs state. Keys are reported in
// sorted order.
func (c *Config) annotationProblems() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if c.AnnotationsIn > AnnotateBoth {
		add("AnnotationsIn %d is unknown: use AnnotateValue, AnnotateHeaders or AnnotateBoth", c.AnnotationsIn)
	}
	if len(c.Annotations) == 0 && c.AnnotationsIn != AnnotateValue {
		add("AnnotationsIn is %s but Annotations is empty: give the annotations, or leave AnnotationsIn unset", c.AnnotationsIn)
	}
	return append(p, annotation.Problems(c.Annotations, MaxAnnotationKeyLen)...)
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
		c.annotationHeaders = annotation.Headers(c.Annotations)
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
