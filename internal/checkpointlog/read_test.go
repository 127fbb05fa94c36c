package checkpointlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRead: Read hands over the records of its key from an offset, in
// order, and returns a *LostError when a known checkpoint has neither
// itself nor a newer record of its key there.
func TestRead(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Offsets: 0 a "1", 1 b "x", 2 a tombstone, 3 a "2", 4 b "y".
	if err := Write(ctx, cl, false, 0,
		&kgo.Record{Topic: "ck", Key: []byte("a"), Value: []byte("1")},
		&kgo.Record{Topic: "ck", Key: []byte("b"), Value: []byte("x")},
		&kgo.Record{Topic: "ck", Key: []byte("a")},
		&kgo.Record{Topic: "ck", Key: []byte("a"), Value: []byte("2")},
		&kgo.Record{Topic: "ck", Key: []byte("b"), Value: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	p := Partition{Topic: "ck"}
	retry := func(error) bool { return true }
	type rec struct {
		offset int64
		value  string
		nil    bool
	}
	read := func(key, known string, from int64) ([]rec, int64, error) {
		var got []rec
		last, err := p.Read(ctx, adm, opts, key, known, from, retry, func(offset int64, value []byte) error {
			got = append(got, rec{offset, string(value), value == nil})
			return nil
		})
		return got, last, err
	}

	got, last, err := read("a", "", 0)
	want := []rec{{0, "1", false}, {2, "", true}, {3, "2", false}}
	if err != nil || last != 3 || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("reading a from 0: %v, last %d, %v; want %v, last 3", got, last, err, want)
	}
	if got, last, err := read("a", "0/1:0", 3); err != nil || last != 3 || len(got) != 1 {
		t.Errorf("reading a from its known checkpoint at 3: %v, last %d, %v; want the record at 3", got, last, err)
	}

	bad := errors.New("bad record")
	if _, err := p.Read(ctx, adm, opts, "a", "", 0, retry, func(int64, []byte) error { return bad }); !errors.Is(err, bad) {
		t.Errorf("apply's error: got %v", err)
	}

	var lost *LostError
	// Known at 4, a record of b: no record of a from there.
	if _, last, err := read("a", "0/1:0", 4); !errors.As(err, &lost) || last != 4 || lost.From != 4 || lost.End != 5 || lost.Known != "0/1:0" || lost.Key != "a" {
		t.Errorf("known a at 4, only b there: last %d, %v; want a *LostError from 4 to 5", last, err)
	}
	// Known at the end: nothing there at all.
	if _, _, err := read("a", "0/1:0", 5); !errors.As(err, &lost) || lost.From != 5 || lost.End != 5 {
		t.Errorf("known a at the end: %v; want a *LostError at 5", err)
	}
	// Nothing known at the end: nothing to find, nothing lost.
	if got, last, err := read("a", "", 5); err != nil || last != 5 || len(got) != 0 {
		t.Errorf("nothing known, at the end: %v, last %d, %v; want nothing", got, last, err)
	}
}
