package main

import (
	"runtime/debug"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// memoryHeadroom is what the derived memory limit allows beyond the
// pipeline's buffers (BatchMaxBytes and the sink's MaxTransactionBytes):
// the runtime, the clients, the caches. It is half of the 64 MiB beyond
// them that the program's resident memory is meant to stay within, the
// other half being for what the limit does not count (the executable's
// mapped pages) and for the collector overshooting a soft limit: with 48
// MiB the 2-minute soak (bench/, 200 B rows) peaked at 119 MiB, with 32
// MiB at 103 MiB, at the same rate.
const memoryHeadroom = 32 << 20

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

// setMemoryLimit applies memoryLimit and returns the limit in force.
func setMemoryLimit(o *options, getenv func(string) string) int64 {
	if limit, ok := memoryLimit(o, getenv); ok {
		debug.SetMemoryLimit(limit)
	}
	return debug.SetMemoryLimit(-1)
}

// ownProcess is set by main: run sets the memory limit of the program's
// own process, not of a test's that calls run, where replicas run side
// by side and the limit would be theirs together.
var ownProcess bool
