package main

import (
	"runtime/debug"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// memoryHeadroom is what the derived memory limit allows beyond the
// pipeline's two buffers (the batches pgcdc holds and the sink's
// transaction): the runtime, the clients, the caches. It is 16 MiB below
// the 64 MiB that issue 11 bounds the resident memory with, for what the
// Go runtime does not count (the executable's mapped pages).
const memoryHeadroom = 48 << 20

// memoryLimit is the soft memory limit the program runs with (-memory-limit),
// and whether to set one: a GOMEMLIMIT in the environment, which the
// runtime already applied, wins; 0 leaves Go's default (no limit); a
// negative value, the default, derives it from the batch size: the
// pipeline's buffers plus memoryHeadroom, so the garbage collector runs
// before the heap doubles past them.
func memoryLimit(o *options, getenv func(string) string) (int64, bool) {
	switch {
	case getenv("GOMEMLIMIT") != "", o.memoryLimit == 0:
		return 0, false
	case o.memoryLimit > 0:
		return o.memoryLimit, true
	}
	batch := o.batchBytes
	if batch == 0 {
		batch = pgcdc.DefaultBatchMaxBytes
	}
	return int64(batch) + kafkasink.DefaultMaxTransactionBytes + memoryHeadroom, true
}

// setMemoryLimit applies memoryLimit and returns the limit in force and
// a function that restores the one before (for tests, which call run in
// one process).
func setMemoryLimit(o *options, getenv func(string) string) (int64, func()) {
	prev := debug.SetMemoryLimit(-1)
	if limit, ok := memoryLimit(o, getenv); ok {
		debug.SetMemoryLimit(limit)
	}
	return debug.SetMemoryLimit(-1), func() { debug.SetMemoryLimit(prev) }
}
