package jsonschema

import (
	"fmt"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
)

// names are the titles and subjects of one table version's schemas in
// one topic.
type names struct {
	valueTitle, keyTitle     string
	valueSubject, keySubject string
}

// namesFor returns the names of e's table's schemas when written to
// topic. Under RecordName and TopicRecordName a schema's title is its
// record name, as Confluent's strategies take a JSON Schema's record name
// from its title (JsonSchema.name()); under TopicName the titles are
// those this encoder has always written, so that the schemas, and their
// ids, stay the ones registered before.
func (enc *Encoder) namesFor(topic string, e *kafkasink.Event) names {
	if enc.subjects == kafkasinkavro.TopicName {
		return names{valueTitle: topic + " change event", keyTitle: topic + " key", valueSubject: topic + "-value", keySubject: topic + "-key"}
	}
	record := e.Schema + "." + e.Table
	if enc.namespace != "" {
		record = enc.namespace + "." + record
	}
	n := names{valueTitle: record + ".Envelope", keyTitle: record + ".Key"}
	n.valueSubject, n.keySubject = n.valueTitle, n.keyTitle
	if enc.subjects == kafkasinkavro.TopicRecordName {
		n.valueSubject, n.keySubject = topic+"-"+n.valueSubject, topic+"-"+n.keySubject
	}
	return n
}

// checkNames returns the problems of cfg's Subjects and Namespace.
func checkNames(cfg *Config) []string {
	var problems []string
	if cfg.Subjects > kafkasinkavro.TopicRecordName {
		problems = append(problems, fmt.Sprintf("jsonschema.Config.Subjects is %s; want kafkasinkavro.TopicName, RecordName or TopicRecordName (-schema-registry-subjects)", cfg.Subjects))
	}
	if cfg.Namespace != "" && cfg.Subjects == kafkasinkavro.TopicName {
		problems = append(problems, fmt.Sprintf("jsonschema.Config.Namespace %q applies to the RecordName and TopicRecordName subject strategies only: "+
			"under TopicName the subjects are the topic's; set Subjects (-schema-registry-subjects) or leave Namespace (-schema-registry-namespace) empty", cfg.Namespace))
	}
	return problems
}

// newSubjectFix says how to give a table's schemas a new subject, for the
// fix of a refused schema.
func (enc *Encoder) newSubjectFix() string {
	if enc.subjects == kafkasinkavro.RecordName {
		return "name its records anew (jsonschema.Config.Namespace; -schema-registry-namespace)"
	}
	return "route the table to a new topic (kafkasink.Config.Topics; -topic-routes)"
}
