package main

import (
	"io"
	"runtime/debug"
	"testing"
)

// TestMemoryLimit pins the soft memory limit the program runs with: derived
// from -batch-max-bytes by default, set by -memory-limit (and its YAML key
// and environment variable), none for 0, and GOMEMLIMIT's own when the
// environment has one.
func TestMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want int64 // 0: no limit set
	}{
		{"derived from the defaults", nil, nil, 16<<20 + 32<<20 + 32<<20},
		{"derived from -batch-max-bytes", []string{"-batch-max-bytes", "4194304"}, nil, 4<<20 + 32<<20 + 32<<20},
		{"-memory-limit", []string{"-memory-limit", "200000000"}, nil, 200000000},
		{"KAFKASINK_MEMORY_LIMIT", nil, map[string]string{"KAFKASINK_MEMORY_LIMIT": "150000000"}, 150000000},
		{"0 is Go's default", []string{"-memory-limit", "0"}, nil, 0},
		{"GOMEMLIMIT wins", []string{"-memory-limit", "200000000"}, map[string]string{"GOMEMLIMIT": "1GiB"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parse(append([]string{"-pg", "postgres://x@localhost/db", "-brokers", "localhost:9092", "-tables", "public.t", "-slot", "s"}, tt.args...),
				func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := memoryLimit(o, func(k string) string { return tt.env[k] })
			if !ok {
				got = 0
			}
			if got != tt.want {
				t.Errorf("memory limit %d, want %d", got, tt.want)
			}
			before := debug.SetMemoryLimit(-1)
			inForce, restore := setMemoryLimit(o, func(k string) string { return tt.env[k] })
			restore()
			if want := tt.want; (want != 0 && inForce != want) || (want == 0 && inForce != before) {
				t.Errorf("limit in force %d, want %d (before: %d)", inForce, want, before)
			}
			if after := debug.SetMemoryLimit(-1); after != before {
				t.Errorf("restore left the limit at %d, want %d", after, before)
			}
		})
	}
}
