package pgoutput

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/kafkasink/kafkasink"
)

// spoolHeaderLen is the size of a spool record's header: subtransaction id
// (4 bytes), WAL position of the message (8), length of the message (4), all
// big-endian. The raw pgoutput message follows.
//
// The spool keeps raw messages rather than decoded events: they are smaller,
// and decoding at commit uses the relation descriptions valid at that point
// of the stream, including Relation messages spooled with the changes.
const spoolHeaderLen = 16

// txnSpool holds the changes of one streamed top-level transaction in a
// temporary file until it commits or aborts. The file is open only during a
// stream block, so many interleaved streamed transactions do not hold many
// file descriptors.
type txnSpool struct {
	xid     uint32
	path    string
	budget  *spoolBudget // shared by the decoder's spools
	f       *os.File
	w       *bufio.Writer
	size    int64               // bytes written so far, taken from budget
	subs    map[uint32]struct{} // aborted subtransactions
	origin  string
	scratch [spoolHeaderLen]byte
}

// spoolPattern matches the names of spool files; newTxnSpool fills in the
// transaction id and os.CreateTemp the star.
const spoolPattern = "kafkasink-pgcdc-xid*-*.spool"

// spoolBudget bounds the bytes a decoder's spools hold at once, so that a
// runaway transaction fails with an error that says so before it fills the
// disk, instead of failing on ENOSPC, reconnecting, being streamed again
// from its start by the server, and failing again forever.
type spoolBudget struct {
	max  int64        // negative: no bound
	used atomic.Int64 // read by Monitor.Stats from another goroutine
	dir  string       // for the error
}

// take reserves n bytes for transaction xid, or says why it cannot.
func (b *spoolBudget) take(n int64, xid uint32) error {
	used := b.used.Load()
	if b.max >= 0 && used+n > b.max {
		return &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: streamed transaction %d needs more spool than SpoolMaxBytes allows (%d bytes; %d are spooled for transactions not yet committed): "+
				"it cannot be delivered. Raise Config.SpoolMaxBytes (program flag -spool-max-bytes; negative: no bound) and make room in the spool directory %s, "+
				"or split such transactions at the source", xid, b.max, used, b.dir)}}
	}
	b.used.Add(n)
	return nil
}

func newTxnSpool(dir string, xid uint32, budget *spoolBudget) (*txnSpool, error) {
	f, err := os.CreateTemp(dir, strings.Replace(spoolPattern, "*", strconv.FormatUint(uint64(xid), 10), 1))
	if err != nil {
		return nil, fmt.Errorf("pgcdc: creating spool file for streamed transaction %d: %w", xid, err)
	}
	path := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("pgcdc: creating spool file for streamed transaction %d: %w", xid, err)
	}
	return &txnSpool{xid: xid, path: path, budget: budget}, nil
}

// open opens the file for appending at the start of a stream block.
func (s *txnSpool) open() error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgcdc: opening spool file of streamed transaction %d: %w", s.xid, err)
	}
	s.f = f
	if s.w == nil {
		s.w = bufio.NewWriterSize(f, 64<<10)
	} else {
		s.w.Reset(f)
	}
	return nil
}

// append writes one message of subtransaction sub to the spool.
func (s *txnSpool) append(sub uint32, lsn kafkasink.LSN, data []byte) error {
	if uint64(len(data)) > 1<<32-1 {
		return fmt.Errorf("pgcdc: message of %d bytes is too large to spool", len(data))
	}
	if err := s.budget.take(spoolHeaderLen+int64(len(data)), s.xid); err != nil {
		return err
	}
	h := s.scratch[:]
	binary.BigEndian.PutUint32(h[0:], sub)
	binary.BigEndian.PutUint64(h[4:], uint64(lsn))
	binary.BigEndian.PutUint32(h[12:], uint32(len(data)))
	if _, err := s.w.Write(h); err != nil {
		return s.writeErr(err)
	}
	if _, err := s.w.Write(data); err != nil {
		return s.writeErr(err)
	}
	s.size += spoolHeaderLen + int64(len(data))
	return nil
}

func (s *txnSpool) writeErr(err error) error {
	return fmt.Errorf("pgcdc: writing spool file of streamed transaction %d: %w", s.xid, err)
}

// pause flushes and closes the file at the end of a stream block.
func (s *txnSpool) pause() error {
	if s.f == nil {
		return nil
	}
	err := s.w.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	s.f = nil
	if err != nil {
		return s.writeErr(err)
	}
	return nil
}

// abortSub marks subtransaction sub as rolled back: replay skips its changes.
// Filtering at replay instead of truncating the file keeps the spool correct
// whatever order the server interleaves subtransactions in.
func (s *txnSpool) abortSub(sub uint32) {
	if s.subs == nil {
		s.subs = make(map[uint32]struct{})
	}
	s.subs[sub] = struct{}{}
}

func (s *txnSpool) aborted(sub uint32) bool {
	_, ok := s.subs[sub]
	return ok
}

// replay reads the spool from the start and calls fn for every record, in
// the order written.
func (s *txnSpool) replay(fn func(sub uint32, lsn kafkasink.LSN, data []byte) error) error {
	if err := s.pause(); err != nil {
		return err
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("pgcdc: opening spool file of streamed transaction %d: %w", s.xid, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var h [spoolHeaderLen]byte
	var buf []byte
	for read := int64(0); read < s.size; {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return s.readErr(err)
		}
		n := int64(binary.BigEndian.Uint32(h[12:]))
		read += spoolHeaderLen + n
		if read > s.size {
			// Only a file changed behind our back can get here; do
			// not trust its length with an allocation.
			return s.readErr(errors.New("record runs past the data written"))
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return s.readErr(err)
		}
		if err := fn(binary.BigEndian.Uint32(h[0:]), kafkasink.LSN(binary.BigEndian.Uint64(h[4:])), buf); err != nil {
			return err
		}
	}
	return nil
}

func (s *txnSpool) readErr(err error) error {
	return fmt.Errorf("pgcdc: reading spool file of streamed transaction %d: %w", s.xid, err)
}

// remove closes and deletes the file. It may be called more than once.
func (s *txnSpool) remove() error {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if s.path == "" {
		return nil
	}
	err := os.Remove(s.path)
	s.path = ""
	s.budget.used.Add(-s.size)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pgcdc: removing spool file of streamed transaction %d: %w", s.xid, err)
	}
	return nil
}
