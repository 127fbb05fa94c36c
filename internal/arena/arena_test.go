package arena

import "testing"

// TestChunks: Room keeps filling a chunk while it has room and then hands
// out the next; after Reset the same chunks come again, a chunk an event
// grew by append is kept grown, and Trim lets the chunks after the one
// being filled go.
func TestChunks(t *testing.T) {
	t.Parallel()
	var c Chunks
	cur := c.Room(nil, 10)
	if cap(cur) != ChunkSize || len(cur) != 0 {
		t.Fatalf("the first chunk has len %d, cap %d; want an empty chunk of %d", len(cur), cap(cur), ChunkSize)
	}
	first := &cur[:1][0]
	cur = append(cur, make([]byte, ChunkSize-5)...)
	if next := c.Room(cur, 5); &next[:1][0] != first {
		t.Error("Room moved on although the chunk had room")
	}
	// An event outgrows the chunk: append copies it to a larger array.
	cur = append(cur, make([]byte, 100)...)
	grown := cap(cur)
	cur = c.Room(cur, 2*ChunkSize)
	if cap(cur) != 2*ChunkSize || len(c.all) != 2 {
		t.Fatalf("Room for more than a chunk: cap %d with %d chunks; want a second chunk of %d", cap(cur), len(c.all), 2*ChunkSize)
	}

	c.Reset()
	cur = c.Room(nil, 10)
	if cap(cur) != grown {
		t.Errorf("after Reset the first chunk has cap %d, want the grown %d", cap(cur), grown)
	}
	c.Trim(cur)
	if len(c.all) != 1 {
		t.Errorf("Trim kept %d chunks, want only the one being filled", len(c.all))
	}
	c.Reset()
	c.Trim(nil)
	if len(c.all) != 0 {
		t.Errorf("Trim before any Room kept %d chunks, want none", len(c.all))
	}
}
