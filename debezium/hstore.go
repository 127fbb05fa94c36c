package debezium

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// hstore columns, in Debezium 3.6.1's hstore.handling.mode json (its
// default): PostgresValueConverter parses the value with pgjdbc's
// HStoreConverter into a java.util.HashMap and writes that map with
// Jackson as a JSON object's text ({"a":"1","b":null}), in a string field
// named io.debezium.data.Json. The order of the object's keys is the
// HashMap's iteration order, which hstoreInJavaOrder reproduces: the same
// text, byte for byte, not only the same object. (hstore.handling.mode
// map, a Connect map, is not supported.) Nothing is allocated for an
// hstore of up to hstoreInlinePairs keys.

// writeHstore writes s, PostgreSQL's text output of an hstore, as the
// string Debezium writes for it, the JSON object text of
// appendHstoreJSON; false, writing nothing, when s is not that output.
func writeHstore(w *connectWriter, s string) bool {
	var inline [hstoreInlinePairs]hstorePair
	pairs, ok := hstoreInJavaOrder(s, inline[:0])
	if !ok {
		return false
	}
	mark := w.beginText()
	w.buf = appendHstoreJSON(w.buf, s, pairs, !w.avro)
	w.endText(mark)
	return true
}

// writeHstorePlaceholder writes the placeholder p of an unchanged TOASTed
// hstore as Debezium writes it: UnchangedToastedPlaceholder's map of the
// placeholder to itself, as its JSON object's text, in a string.
func writeHstorePlaceholder(w *connectWriter, p string) {
	mark := w.beginText()
	out := jsonText{dst: w.buf, inString: !w.avro}
	out.ascii('{')
	out.string(p, false)
	out.ascii(':')
	out.string(p, false)
	out.ascii('}')
	w.buf = out.dst
	w.endText(mark)
}

// hstoreInlinePairs is how many pairs writeHstore orders without
// allocating.
const hstoreInlinePairs = 32

// hstorePair is where one pair of an hstore's text starts (its key's
// opening quote) and its key's hash in Java's HashMap.
type hstorePair struct {
	at   int
	hash int32
}

// hstoreInJavaOrder appends the pairs of s, PostgreSQL's text output of
// an hstore ("\"a\"=>\"1\", \"b\"=>NULL"; the empty hstore is ""), to
// pairs in the iteration order of the java.util.HashMap pgjdbc fills in
// the order of s. ok is false when s is not hstore output, or has a key
// twice, which hstore never prints.
//
// The order is exact except in one case no real hstore meets by chance:
// more than 8 keys in one bucket of a HashMap of 64 buckets or more,
// which Java turns into a tree and iterates in another order (the object
// is the same).
func hstoreInJavaOrder(s string, pairs []hstorePair) ([]hstorePair, bool) {
	pairs, ok := hstorePairs(s, pairs)
	if !ok {
		return nil, false
	}
	mask := hashMapCapacity(pairs) - 1
	// Within a bucket, HashMap keeps the order of insertion, through
	// every resize: a stable sort by bucket is its iteration order.
	slices.SortStableFunc(pairs, func(a, b hstorePair) int { return cmp.Compare(a.hash&mask, b.hash&mask) })
	for i := range pairs {
		for j := i + 1; j < len(pairs) && pairs[j].hash&mask == pairs[i].hash&mask; j++ {
			if sameHstoreText(hstoreKey(s, pairs[i].at), hstoreKey(s, pairs[j].at)) {
				return nil, false
			}
		}
	}
	return pairs, true
}

// appendHstoreJSON appends the JSON object text Debezium writes for the
// hstore text s, whose pairs are pairs (hstoreInJavaOrder): the pairs in
// that order, each key and value escaped as Jackson escapes them, NULL
// values null; escaped once more as the content of a JSON string when
// inString.
func appendHstoreJSON(dst []byte, s string, pairs []hstorePair, inString bool) []byte {
	out := jsonText{dst: dst, inString: inString}
	out.ascii('{')
	for i, p := range pairs {
		if i > 0 {
			out.ascii(',')
		}
		key := hstoreKey(s, p.at)
		out.string(key, true)
		out.ascii(':')
		// The pair goes on: the key's closing quote, "=>", the value.
		if value := s[p.at+len(key)+4:]; strings.HasPrefix(value, "NULL") {
			out.dst = append(out.dst, "null"...)
		} else {
			out.string(value[1:hstoreQuotedEnd(value)-1], true)
		}
	}
	out.ascii('}')
	return out.dst
}

// hstorePairs appends the pairs of hstore's text output s to pairs, in
// order: "key"=>"value" or "key"=>NULL, separated by ", ", with '"' and
// '\' inside the quotes escaped by a backslash.
func hstorePairs(s string, pairs []hstorePair) ([]hstorePair, bool) {
	for i := 0; i < len(s); {
		if len(pairs) > 0 {
			if !strings.HasPrefix(s[i:], ", ") {
				return nil, false
			}
			i += 2
		}
		at := i
		n := hstoreQuotedEnd(s[i:])
		if n < 0 || !strings.HasPrefix(s[i+n:], "=>") {
			return nil, false
		}
		hash := javaHashMapHash(s[i+1 : i+n-1])
		i += n + 2
		if strings.HasPrefix(s[i:], "NULL") {
			i += 4
		} else if n = hstoreQuotedEnd(s[i:]); n >= 0 {
			i += n
		} else {
			return nil, false
		}
		pairs = append(pairs, hstorePair{at: at, hash: hash})
	}
	return pairs, true
}

// hstoreQuotedEnd returns the length of the double-quoted string s starts
// with, quotes included, or -1.
func hstoreQuotedEnd(s string) int {
	if s == "" || s[0] != '"' {
		return -1
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			return i + 1
		case '\\':
			i++ // the next byte is literal
		}
	}
	return -1
}

// hstoreKey returns the text inside the quotes of the key of the pair at
// at in s, still escaped.
func hstoreKey(s string, at int) string {
	return s[at+1 : at+hstoreQuotedEnd(s[at:])-1]
}

// nextHstoreRune returns the character of the quoted hstore text q (still
// escaped when escaped) at i, its bytes in q, and where the next one
// starts. As pgjdbc does, it decodes the text before it unescapes it: a
// backslash makes the character after it literal.
func nextHstoreRune(q string, i int, escaped bool) (r rune, raw string, next int) {
	r, size := utf8.DecodeRuneInString(q[i:])
	if escaped && r == '\\' && i+size < len(q) {
		i += size
		r, size = utf8.DecodeRuneInString(q[i:])
	}
	return r, q[i : i+size], i + size
}

// sameHstoreText reports whether two quoted hstore texts, escaped, are the
// same text.
func sameHstoreText(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ra, rb string
		_, ra, i = nextHstoreRune(a, i, true)
		_, rb, j = nextHstoreRune(b, j, true)
		if ra != rb {
			return false
		}
	}
	return i == len(a) && j == len(b)
}

// javaHashMapHash is the hash java.util.HashMap files a String key under,
// for a key that is the quoted hstore text q: String.hashCode
// (s[0]*31^(n-1) + ... over its UTF-16 code units, in int arithmetic)
// with its high half folded into its low half.
func javaHashMapHash(q string) int32 {
	var h int32
	for i := 0; i < len(q); {
		var r rune
		r, _, i = nextHstoreRune(q, i, true)
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + 0xd800 + r>>10 // the surrogate pair
			r = 0xdc00 + r&0x3ff
		}
		h = 31*h + r
	}
	return h ^ int32(uint32(h)>>16)
}

// hashMapCapacity is the number of buckets of a java.util.HashMap made
// with new HashMap() after the keys of pairs are put into it in order:
// 16, doubled whenever it holds more than three quarters as many keys,
// and, while under 64, also whenever a bucket reaches 9 keys (Java
// resizes a small table rather than make the bucket a tree).
func hashMapCapacity(pairs []hstorePair) int32 {
	capacity := int32(16)
	for i := range pairs {
		if capacity < 64 {
			bucket := pairs[i].hash & (capacity - 1)
			n := 0
			for j := range i + 1 {
				if pairs[j].hash&(capacity-1) == bucket {
					n++
				}
			}
			if n >= 9 {
				capacity *= 2
			}
		}
		if int32(i+1) > capacity/4*3 {
			capacity *= 2
		}
	}
	return capacity
}

// jsonText appends JSON text, escaped once more as the content of a JSON
// string when inString.
type jsonText struct {
	dst      []byte
	inString bool
}

// ascii appends the ASCII character c of the JSON text.
func (w *jsonText) ascii(c byte) {
	if w.inString && (c == '"' || c == '\\') {
		w.dst = append(w.dst, '\\')
	}
	w.dst = append(w.dst, c)
}

// string appends the text q (an hstore's quoted text, still escaped when
// escaped) as a JSON string, the way Jackson's JsonGenerator writes it by
// default: '"' and '\' with a backslash, \b, \t, \n, \f and \r short, the
// other characters below U+0020 as \u00XX with upper-case hex digits,
// everything else (DEL, U+2028, non-ASCII) as it is; invalid UTF-8 as
// U+FFFD, as Java decodes it. As the content of a JSON string (inString),
// U+2028 and U+2029 are escaped there, as jsonw writes them.
func (w *jsonText) string(q string, escaped bool) {
	const hex = "0123456789ABCDEF"
	w.ascii('"')
	for i := 0; i < len(q); {
		var r rune
		var raw string
		r, raw, i = nextHstoreRune(q, i, escaped)
		switch {
		case r == '"' || r == '\\':
			w.ascii('\\')
			w.ascii(byte(r))
		case r < 0x20:
			w.ascii('\\')
			switch r {
			case '\b':
				w.ascii('b')
			case '\t':
				w.ascii('t')
			case '\n':
				w.ascii('n')
			case '\f':
				w.ascii('f')
			case '\r':
				w.ascii('r')
			default:
				w.dst = append(w.dst, 'u', '0', '0', hex[r>>4], hex[r&0xf])
			}
		case w.inString && (r == '\u2028' || r == '\u2029'):
			w.dst = append(w.dst, `\u202`...)
			w.dst = append(w.dst, hex[r&0xf])
		case r == utf8.RuneError && len(raw) == 1:
			w.dst = utf8.AppendRune(w.dst, utf8.RuneError)
		default:
			w.dst = append(w.dst, raw...)
		}
	}
	w.ascii('"')
}
