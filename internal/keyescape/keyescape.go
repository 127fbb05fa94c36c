// Package keyescape escapes the values of a text key (kafkasink.KeyText):
// a backslash becomes \\ and a '|', the separator, becomes \|, so that a
// reader can split the key on the separators it finds unescaped.
package keyescape

// Append appends s with '\' and '|' preceded by a backslash.
func Append(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '|' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', c)
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}

// InPlace escapes b[start:] like Append, growing b as needed.
func InPlace(b []byte, start int) []byte {
	n := 0
	for _, c := range b[start:] {
		if c == '\\' || c == '|' {
			n++
		}
	}
	if n == 0 {
		return b
	}
	end := len(b)
	b = append(b, make([]byte, n)...)
	// Walk backwards so every byte moves once and nothing is overwritten
	// before it is read.
	w := len(b)
	for r := end - 1; r >= start; r-- {
		c := b[r]
		w--
		b[w] = c
		if c == '\\' || c == '|' {
			w--
			b[w] = '\\'
		}
	}
	return b
}
