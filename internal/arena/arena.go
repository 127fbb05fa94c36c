// Package arena is the memory a batch's keys, values and header values
// are encoded into: chunks filled one after the other, kept from one
// batch to the next.
package arena

// ChunkSize is the size of a chunk. A chunk is filled and then left for
// the next, never grown by copying (unless one event outgrows a whole
// chunk): a single arena grown by append copied the whole batch each time
// it doubled, which with the page faults of fresh memory was a quarter of
// a Write's CPU time on 10,000 events of 1 KB.
const ChunkSize = 1 << 20

// Chunks are an arena's chunks, in the order they are filled. The chunk
// being filled is the caller's, a []byte it appends to: Room hands out
// the next one, and the caller gives it back to Room and Trim. The zero
// Chunks holds none. Not safe for concurrent use.
type Chunks struct {
	all  [][]byte
	used int // chunks handed out since Reset; the last is being filled
}

// Room returns cur, the chunk being filled, when it has room for need
// more bytes; else it keeps cur as it is (grown, if an event outgrew it)
// and returns the next chunk, emptied, with at least that room.
func (c *Chunks) Room(cur []byte, need int) []byte {
	if cap(cur)-len(cur) >= need {
		return cur
	}
	if c.used > 0 {
		c.all[c.used-1] = cur[:0]
	}
	c.used++
	if c.used > len(c.all) {
		c.all = append(c.all, nil)
	}
	if cap(c.all[c.used-1]) < need {
		c.all[c.used-1] = make([]byte, 0, max(ChunkSize, need))
	}
	return c.all[c.used-1][:0]
}

// Reset starts the next batch at the first chunk: what the last batch
// wrote is overwritten.
func (c *Chunks) Reset() { c.used = 0 }

// Trim keeps cur, the chunk being filled, and the chunks before it for
// the next batch, and lets the chunks after it go, so that one large
// batch does not pin its memory for good.
func (c *Chunks) Trim(cur []byte) {
	if c.used > 0 {
		c.all[c.used-1] = cur[:0]
	}
	clear(c.all[c.used:])
	c.all = c.all[:c.used]
}
