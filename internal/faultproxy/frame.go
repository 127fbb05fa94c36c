package faultproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds one frame, as a broker's socket.request.max.bytes and
// kgo's BrokerMaxReadBytes do (both 100 MiB): a bigger length prefix means
// the stream is out of step, not a real message.
const maxFrame = 100 << 20

// readFrame reads one size-prefixed frame and returns it without its size.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxFrame {
		return nil, fmt.Errorf("frame size %d out of range 0..%d: the stream is out of step", n, maxFrame)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// writeFrame writes frame with its size prefix in one write.
func writeFrame(w io.Writer, frame []byte) error {
	buf := make([]byte, 4, 4+len(frame))
	binary.BigEndian.PutUint32(buf, uint32(len(frame)))
	_, err := w.Write(append(buf, frame...))
	return err
}

var errShort = errors.New("frame too short")

// decoder reads the primitive types of the Kafka protocol.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) int16() int16 {
	if v := d.take(2); v != nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (d *decoder) int32() int32 {
	if v := d.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

// nullableString reads an int16-length string; null reads as "".
func (d *decoder) nullableString() string {
	n := d.int16()
	if n < 0 {
		return ""
	}
	return string(d.take(int(n)))
}

// compactNullableString reads a uvarint-length (plus one) string.
func (d *decoder) compactNullableString() string {
	n := d.uvarint()
	if n == 0 {
		return ""
	}
	return string(d.take(int(n - 1)))
}

// skipTags skips a tagged-fields section (KIP-482).
func (d *decoder) skipTags() {
	for n := d.uvarint(); n > 0 && d.err == nil; n-- {
		d.uvarint() // tag
		d.take(int(d.uvarint()))
	}
}

// requestHeader is a request frame's header, and whether a response to it
// will come.
type requestHeader struct {
	Request
	expectsResponse bool
	bodyAt          int   // where a Produce request's body starts in its frame
	fault           Fault // what the proxy decided for it
}

// parseRequest reads the header of a request frame. Request header v1
// (client id) is common to every version; flexible versions add tagged
// fields, which matter only to find where a Produce body starts.
func parseRequest(frame []byte) (requestHeader, error) {
	d := decoder{b: frame}
	h := requestHeader{expectsResponse: true}
	h.Key = d.int16()
	h.Version = d.int16()
	h.CorrelationID = d.int32()
	h.ClientID = d.nullableString()
	if d.err != nil {
		return h, fmt.Errorf("request header: %w", d.err)
	}
	if kmsg.Key(h.Key) == kmsg.Produce { // with acks=0 it gets no response
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(h.Version)
		if req.IsFlexible() {
			d.skipTags()
		}
		h.bodyAt = len(frame) - len(d.b)
		if h.Version >= 3 {
			if req.IsFlexible() {
				d.compactNullableString()
			} else {
				d.nullableString()
			}
		}
		acks := d.int16()
		if d.err != nil {
			return h, fmt.Errorf("produce request v%d: reading acks: %w", h.Version, d.err)
		}
		h.expectsResponse = acks != 0
	}
	return h, nil
}

// responseCorrelationID reads the correlation id a response frame starts
// with.
func responseCorrelationID(frame []byte) (int32, error) {
	d := decoder{b: frame}
	id := d.int32()
	return id, d.err
}

// corruptRecords returns a copy of the Produce request frame of h with a
// byte of each record batch's CRC flipped. The batches are found by their
// bytes, which the frame holds verbatim.
func corruptRecords(frame []byte, h requestHeader) ([]byte, error) {
	bodyAt, version := h.bodyAt, h.Version
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	if err := req.ReadFrom(frame[bodyAt:]); err != nil {
		return nil, fmt.Errorf("reading produce request v%d: %w", version, err)
	}
	out := bytes.Clone(frame)
	const crcAt = 8 + 4 + 4 + 1 // base offset, length, leader epoch, magic
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			i := bytes.Index(frame[bodyAt:], p.Records)
			if len(p.Records) <= crcAt || i < 0 {
				return nil, fmt.Errorf("produce request v%d: no record batch to corrupt for %s[%d]", version, t.Topic, p.Partition)
			}
			out[bodyAt+i+crcAt] ^= 0xff
		}
	}
	return out, nil
}
