package main

// The ceiling of an exactly-once initial snapshot into Kafka on the
// machine the round runs on, whatever the sink: COPY of the table on one
// connection, each row's COPY text produced as it is (not encoded: no
// envelope, no headers, the id as key) by raw franz-go, in one
// transaction per chunk of rows with a checkpoint-sized record last, as
// pgcdc's exactly-once sink commits a chunk, and with the next chunk read
// while one is written, as pgcdc reads. Its ratio to COPY is what
// delivering into Kafka exactly once costs here; pgcdc's ratio to it is
// what pgcdc and the sink cost on top.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/pgcdc"
)

// ceilingResult is what copyToKafka measured: the time from the start of
// COPY to the last chunk's commit, this process's CPU time over it (user
// and system), and the rows committed.
type ceilingResult struct {
	Seconds    float64
	CPUSeconds float64
	Rows       int64
}

// copyToKafka runs the ceiling into topic, which must exist, with chunks
// of chunkRows rows (0: pgcdc's default).
func (e *pgEnv) copyToKafka(ctx context.Context, topic string, chunkRows int) (ceilingResult, error) {
	if chunkRows == 0 {
		chunkRows = pgcdc.DefaultSnapshotChunkRows
	}
	cl, err := newFranzClient(e.cfg.brokers, e.cfg.compression, topic)
	if err != nil {
		return ceilingResult{}, err
	}
	defer cl.Close()
	db, err := pgx.Connect(ctx, e.cfg.conn)
	if err != nil {
		return ceilingResult{}, err
	}
	defer db.Close(context.Background())
	// Ready before the clock, as pgcdc's sink is when Run starts: a
	// producer id, the coordinator, and the checkpoint topic's metadata.
	ckTopic := topic + "-checkpoint"
	if err := commitChunk(ctx, cl, nil, ckTopic, 0); err != nil {
		return ceilingResult{}, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	chunks := make(chan []*kgo.Record, 1) // one chunk read ahead of the one in flight
	rows := &chunkedRows{topic: topic, size: chunkRows, out: chunks, ctx: ctx}
	start, cpuStart := time.Now(), cpuSeconds()
	copied := make(chan error, 1)
	go func() {
		_, err := db.PgConn().CopyTo(ctx, rows, "COPY (SELECT * FROM "+e.name+") TO STDOUT")
		if err == nil {
			err = rows.flush()
		}
		close(chunks)
		copied <- err
	}()
	var n int64
	for chunk := range chunks {
		if err := commitChunk(ctx, cl, chunk, ckTopic, n); err != nil {
			cancel(err)
			for range chunks { // let the COPY goroutine end
			}
			<-copied
			return ceilingResult{}, err
		}
		n += int64(len(chunk))
	}
	if err := <-copied; err != nil {
		return ceilingResult{}, fmt.Errorf("COPY: %w", err)
	}
	return ceilingResult{Seconds: time.Since(start).Seconds(), CPUSeconds: cpuSeconds() - cpuStart, Rows: n}, nil
}

// commitChunk writes one chunk and a checkpoint-sized record after done
// rows in a transaction of its own.
func commitChunk(ctx context.Context, cl *kgo.Client, chunk []*kgo.Record, ckTopic string, done int64) error {
	ck := &kgo.Record{Topic: ckTopic, Key: []byte("ceiling"), Value: checkpointValue(int(done) + len(chunk))}
	return produceInTransaction(ctx, cl, chunk, ck)
}

// chunkedRows is COPY's writer: it makes a record of each row of COPY's
// text (the line as value, its first field as key) and hands them on in
// chunks of size rows.
type chunkedRows struct {
	topic   string
	size    int
	out     chan<- []*kgo.Record
	ctx     context.Context
	chunk   []*kgo.Record
	partial []byte // a row split between writes
}

func (c *chunkedRows) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		line, rest, whole := bytes.Cut(p, []byte{'\n'})
		p = rest
		if !whole {
			c.partial = append(c.partial, line...)
			break
		}
		// pgconn reuses p: the record needs its own copy.
		value := append(append([]byte(nil), c.partial...), line...)
		c.partial = c.partial[:0]
		key, _, _ := bytes.Cut(value, []byte{'\t'})
		c.chunk = append(c.chunk, &kgo.Record{Topic: c.topic, Key: key, Value: value})
		if len(c.chunk) == c.size {
			if err := c.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// flush hands on the rows read since the last chunk.
func (c *chunkedRows) flush() error {
	if len(c.chunk) == 0 {
		return nil
	}
	select {
	case c.out <- c.chunk:
		c.chunk = make([]*kgo.Record, 0, c.size)
		return nil
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
}
