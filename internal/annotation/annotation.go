// Package annotation checks kafkasink.Config.Annotations, static
// key/values echoed in every record of an event, and writes them in the
// two places records carry them: a JSON member of the value and headers.
package annotation

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

// reservedPrefixes are the key prefixes refused as annotation keys,
// because header keys under them belong to someone else, with what they
// are. A key is refused in every place, so that moving annotations from
// the value to the headers never meets a new refusal.
var reservedPrefixes = []struct{ prefix, whose string }{
	{"kafkasink.", "the sink's own headers (kafkasink.id, kafkasink.op, ...)"},
	{"__", "the headers of Kafka's own tools and of Kafka Connect and its connectors (__connect.*, and each connector's own)"},
}

// Problems returns the problems of the annotations m, naming the
// Annotations setting: each key must be 1 to maxKeyLen bytes of
// [a-zA-Z0-9._-] outside the reserved prefixes, each value valid UTF-8.
// Keys are reported in sorted order.
func Problems(m map[string]string, maxKeyLen int) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case k == "":
			add("Annotations has an empty key: give every annotation a name")
		case len(k) > maxKeyLen:
			add("Annotations key %.40q... is %d bytes: use at most %d", k, len(k), maxKeyLen)
		case !topicadmin.ValidChars(k):
			add("Annotations key %q has characters outside [a-zA-Z0-9._-]: use only those, so it is the same name in JSON, in a header and to every tool", k)
		}
		for _, r := range reservedPrefixes {
			if strings.HasPrefix(k, r.prefix) {
				add("Annotations key %q starts with %q, which is reserved for %s: choose another name", k, r.prefix, r.whose)
			}
		}
		if v := m[k]; !utf8.ValidString(v) {
			add("Annotations[%q] is not valid UTF-8 (%q): JSON would replace its bad bytes and the header would keep them; give text", k, v)
		}
	}
	return p
}

// Headers returns the annotations as record headers, in key order. Their
// values are shared by every record: neither the sink nor the client
// writes to a header value.
func Headers(m map[string]string) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(m[k])})
	}
	return hs
}

// Member returns the JSON member `,"annotations":{...}` of the
// annotations, keys in sorted order, for an encoder to append to its
// values as it is.
func Member(m map[string]string) string {
	return string(jsonw.AppendStringMap([]byte(`,"annotations":`), m))
}
