// Package ownedopts finds, among the franz-go options a sink's Config
// passes through (Config.ClientOptions), those that set what the sink
// owns: a setting of a Config field, or one the sink's guarantees rest
// on. A passthrough that sets one is refused, not overridden.
package ownedopts

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// owned are the client settings the sink sets itself; a passthrough that
// sets them would break a guarantee, so it is refused with hint.
var owned = []struct {
	opt  any
	hint string
	// typeOnly compares only the value's type: kgo builds a new default
	// partitioner per client, so two defaults differ as values.
	typeOnly bool
}{
	{kgo.SeedBrokers, "use Config.Brokers", false},
	{kgo.TransactionalID, "use Config.TransactionalID", false},
	{kgo.TransactionTimeout, "use Config.TransactionTimeout", false},
	{kgo.DisableIdempotentWrite, "use Config.Mode = Plain", false},
	{kgo.RequiredAcks, "use Config.Acks (Plain mode only)", false},
	{kgo.RecordPartitioner, "the sink partitions with Kafka's murmur2 so other producers agree", true},
	{kgo.ProducerBatchMaxBytes, "use Config.MaxRecordBytes", false},
	{kgo.AllowAutoTopicCreation, "the sink creates topics itself (Config.Topics)", false},
	{kgo.DialTLSConfig, "use Config.TLS", false},
	{kgo.SASL, "use Config.SASL", false},
	{kgo.WithLogger, "use Config.Logger: the sink gives franz-go's log to it, with the sink id", true},
}

// Problems returns the problems of opts, Config.ClientOptions: consumer
// options, and options the sink owns (those of Config fields, and those
// it sets itself). It compares a client built from opts with one built
// from none: any owned option whose value differs was set by the
// caller.
func Problems(opts []kgo.Opt) []string {
	var p []string
	for _, o := range opts {
		switch o.(type) {
		case kgo.ConsumerOpt, kgo.GroupOpt:
			p = append(p, fmt.Sprintf("ClientOptions has a consumer option (%T): the sink does not consume; remove it", o))
		}
	}
	if len(p) > 0 || len(opts) == 0 {
		return p
	}
	// An owned option can make the set invalid by itself (acks below
	// all while idempotence is on). Probe such a set with idempotence
	// off on both sides, so the option is named rather than kgo's rule.
	var extra []kgo.Opt
	invalid := kgo.ValidateOpts(opts...)
	if invalid != nil {
		extra = []kgo.Opt{kgo.DisableIdempotentWrite()}
	}
	base, err := kgo.NewClient(extra...)
	if err != nil {
		return []string{"ClientOptions: " + err.Error()}
	}
	defer base.Close()
	probe, err := kgo.NewClient(append(slices.Clone(opts), extra...)...)
	if err != nil {
		return []string{"ClientOptions: " + err.Error()}
	}
	defer probe.Close()
	for _, o := range owned {
		format := "%#v"
		if o.typeOnly {
			format = "%T" // of each value: OptValues returns a []any
		}
		if optValues(format, base.OptValues(o.opt)) != optValues(format, probe.OptValues(o.opt)) {
			p = append(p, fmt.Sprintf("ClientOptions sets %s, which the sink owns: %s", optName(o.opt), o.hint))
		}
	}
	if invalid != nil && len(p) == 0 {
		p = append(p, "ClientOptions: "+invalid.Error())
	}
	return p
}

// optValues formats each of an option's values with format.
func optValues(format string, values []any) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = fmt.Sprintf(format, v)
	}
	return strings.Join(out, ", ")
}

// optName returns the name of a kgo option function, such as
// "TransactionalID".
func optName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return name[strings.LastIndexByte(name, '.')+1:]
}
