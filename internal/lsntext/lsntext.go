// Package lsntext reads and writes PostgreSQL's text form of a log
// sequence number, two hexadecimal halves separated by a slash
// ("16/B374D848"), upper case as the server prints it.
package lsntext

import (
	"fmt"
	"strconv"
	"strings"
)

// Append appends the text form of lsn to dst.
func Append(dst []byte, lsn uint64) []byte {
	start := len(dst)
	dst = strconv.AppendUint(dst, lsn>>32, 16)
	dst = append(dst, '/')
	dst = strconv.AppendUint(dst, lsn&0xFFFFFFFF, 16)
	upperHex(dst[start:])
	return dst
}

// upperHex upper-cases the hexadecimal digits strconv writes, so LSNs read
// the same as PostgreSQL prints them.
func upperHex(b []byte) {
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
}

// Parse parses the text form of an LSN.
func Parse(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("kafkasink: invalid LSN %q: want two hexadecimal halves separated by '/', like 16/B374D848", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil || hi == "" || lo == "" {
		return 0, fmt.Errorf("kafkasink: invalid LSN %q: want two hexadecimal halves separated by '/', like 16/B374D848", s)
	}
	return h<<32 | l, nil
}
