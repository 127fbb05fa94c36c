// Package keytext writes one key column value in the text form of a
// kafkasink.KeyText key (see kafkasink.AppendKey for the rules), escaped
// by keyescape so that the values can be joined with '|'.
package keytext

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kafkasink/kafkasink/encoding/jsonw"
	"github.com/kafkasink/kafkasink/internal/keyescape"
)

// Null is the text form of a NULL key value, PostgreSQL's COPY spelling.
const Null = `\N`

// AppendValue appends the escaped text form of v. ext writes the values
// of the caller's own types inside []any and map[string]any, which are
// written as their JSON form; it names those types in the error for a
// type neither knows. A caller's own type as v itself is converted by the
// caller first.
func AppendValue(dst []byte, v any, ext *jsonw.Extension) ([]byte, error) {
	if out, ok := jsonw.AppendInteger(dst, v); ok {
		return out, nil
	}
	switch x := v.(type) {
	case nil:
		return append(dst, Null...), nil
	case string:
		return keyescape.Append(dst, x), nil
	case json.RawMessage:
		if x == nil {
			return append(dst, Null...), nil
		}
		return keyescape.Append(dst, string(x)), nil
	case []byte:
		if x == nil {
			return append(dst, Null...), nil
		}
		return hex.AppendEncode(dst, x), nil
	case bool:
		return jsonw.AppendBool(dst, x), nil
	case float64:
		return jsonw.AppendFloatText(dst, x, 64), nil
	case float32:
		return jsonw.AppendFloatText(dst, float64(x), 32), nil
	case time.Time:
		return x.UTC().AppendFormat(dst, time.RFC3339Nano), nil
	case []any, map[string]any:
		// Escape the JSON form in place: it is appended first, then the
		// bytes are shifted right as escapes are inserted.
		start := len(dst)
		out, err := jsonw.AppendValueExt(dst, x, ext)
		if err != nil {
			return nil, err
		}
		return keyescape.InPlace(out, start), nil
	}
	return nil, &jsonw.UnsupportedTypeError{Type: fmt.Sprintf("%T", v), Supported: jsonw.SupportedTypes + ", and " + ext.Types}
}
