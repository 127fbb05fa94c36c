//go:build race

package jsonw

// raceEnabled is true under the race detector, which makes sync.Pool drop
// items at random (json.Valid pools its scanners), so allocation counts
// are not meaningful there.
const raceEnabled = true
