package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/kafkasink/kafkasink"
)

// Version is what an encoder registered for one table version written to
// one topic.
type Version interface {
	// Place is where it was registered for: the topic, the table, and
	// the key columns (nil without a key schema).
	Place() (topic, schema, table string, keyColumns []string)
}

// Versions are the table versions an encoder prepared, by their Relation:
// the source shares one *kafkasink.Relation among the events of a table
// version. The zero value is ready to use; it is safe for concurrent use.
type Versions[V Version] struct {
	mu   sync.RWMutex
	m    map[*kafkasink.Relation]prepared[V]
	last uint64 // the seq of the latest version prepared
}

// prepared is a version and when it was prepared.
type prepared[V Version] struct {
	v   V
	seq uint64
}

// Prepare calls register for every table version among events not
// prepared for its route yet (its topic, its key columns), with the
// version prepared before when there is one (ok), and keeps what register
// returns. It refuses a table version routed to two topics in one Write
// (pkg names the encoder's package in the error). An event without a
// Relation or a topic is left for Encode to reject.
func (vs *Versions[V]) Prepare(ctx context.Context, pkg string, events []kafkasink.Event, routes []kafkasink.EventRoute,
	register func(ctx context.Context, e *kafkasink.Event, route kafkasink.EventRoute, prev V, ok bool) (V, error)) error {
	var batch map[*kafkasink.Relation]string // table versions of this batch, to their topics
	for i := range events {
		e, route := &events[i], routes[i]
		if route.Topic == "" || e.Relation == nil {
			continue
		}
		if topic, seen := batch[e.Relation]; seen && topic != route.Topic {
			return &kafkasink.PrepareError{Err: fmt.Errorf("%s: %s is routed to two topics in one Write, %s and %s; "+
				"a Topics.Route function must give a table one topic for the whole of a Write", pkg, kafkasink.TableName(e.Schema, e.Table), topic, route.Topic)}
		}
		if batch == nil {
			batch = make(map[*kafkasink.Relation]string)
		}
		batch[e.Relation] = route.Topic
		prev, ok := vs.Get(e.Relation)
		if ok {
			topic, _, _, keyColumns := prev.Place()
			if topic == route.Topic && (len(route.KeyColumns) == 0 || slices.Equal(keyColumns, route.KeyColumns)) {
				continue
			}
		}
		next, err := register(ctx, e, route, prev, ok)
		if err != nil {
			return err
		}
		vs.mu.Lock()
		if vs.m == nil {
			vs.m = make(map[*kafkasink.Relation]prepared[V])
		}
		vs.last++
		vs.m[e.Relation] = prepared[V]{next, vs.last}
		vs.forgetOlder(e, batch)
		vs.mu.Unlock()
	}
	return nil
}

// forgetOlder drops the versions of e's table that this batch does not
// use: the source sends a new Relation when a table changes, and never
// an event of an older one after it. Called with mu held.
func (vs *Versions[V]) forgetOlder(e *kafkasink.Event, batch map[*kafkasink.Relation]string) {
	for rel, other := range vs.m {
		_, schema, table, _ := other.v.Place()
		if _, used := batch[rel]; !used && schema == e.Schema && table == e.Table {
			delete(vs.m, rel)
		}
	}
}

// Lookup returns the version prepared for e's table, or a
// *kafkasink.EncodeError saying why there is none; pkg names the
// encoder's package, and schema what it derives ("its Avro schema").
func (vs *Versions[V]) Lookup(e *kafkasink.Event, pkg, schema string) (V, error) {
	var none V
	if e.Relation == nil {
		return none, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("%s needs Event.Relation, the table's declared columns, to derive %s; pgcdc sets it", pkg, schema)}
	}
	v, ok := vs.Get(e.Relation)
	if !ok {
		return none, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Err: fmt.Errorf("the table version was not prepared: a %s encoder writes through kafkasink.Config.Encoder, whose Write prepares it", pkg)}
	}
	return v, nil
}

// Get returns the version prepared for rel.
func (vs *Versions[V]) Get(rel *kafkasink.Relation) (V, bool) {
	vs.mu.RLock()
	defer vs.mu.RUnlock()
	p, ok := vs.m[rel]
	return p.v, ok
}

// Previous returns the version of e's table other than e's own prepared
// last, to say what changed when the registry refuses the new one.
func (vs *Versions[V]) Previous(e *kafkasink.Event) (V, bool) {
	vs.mu.RLock()
	defer vs.mu.RUnlock()
	var latest prepared[V]
	for rel, p := range vs.m {
		if _, schema, table, _ := p.v.Place(); rel != e.Relation && schema == e.Schema && table == e.Table && p.seq > latest.seq {
			latest = p
		}
	}
	return latest.v, latest.seq != 0
}
