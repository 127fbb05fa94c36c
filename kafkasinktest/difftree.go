package kafkasinktest

import (
	"fmt"
	"slices"
)

// Absent stands, in a DiffTrees difference, for a member one side lacks.
type Absent struct{}

// DiffTrees compares two decoded trees (maps of strings to trees, slices
// of trees, and leaves: what encoding/json or an Avro decoder makes of a
// record), as the library's conformance tests compare its records with
// Debezium's, and calls add with the path of each difference
// (path.member, path[index]): a member one side lacks (Absent on that
// side), a map against a non-map, an array of another length or against
// a non-array, and two leaves same says differ. Members are visited in
// sorted order, so the differences come in a stable order.
func DiffTrees(path string, want, got any, same func(want, got any) bool, add func(path string, want, got any)) {
	switch w := want.(type) {
	case map[string]any:
		o, ok := got.(map[string]any)
		if !ok {
			add(path, want, got)
			return
		}
		keys := make([]string, 0, len(w)+len(o))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range o {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			wv, inWant := w[k]
			ov, inGot := o[k]
			switch {
			case !inWant:
				add(path+"."+k, Absent{}, ov)
			case !inGot:
				add(path+"."+k, wv, Absent{})
			default:
				DiffTrees(path+"."+k, wv, ov, same, add)
			}
		}
	case []any:
		o, ok := got.([]any)
		if !ok || len(o) != len(w) {
			add(path, want, got)
			return
		}
		for i := range w {
			DiffTrees(fmt.Sprintf("%s[%d]", path, i), w[i], o[i], same, add)
		}
	default:
		if !same(want, got) {
			add(path, want, got)
		}
	}
}
