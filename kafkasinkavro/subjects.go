package kafkasinkavro

import (
	"fmt"
	"strings"

	"github.com/kafkasink/kafkasink"
)

// SubjectStrategy says under which subjects of the Schema Registry an
// Encoder registers its schemas, and how it names its records: Confluent's
// subject name strategies (the serializers' key.subject.name.strategy and
// value.subject.name.strategy). jsonschema.Config.Subjects takes it too,
// its schemas' titles being their record names.
type SubjectStrategy uint8

const (
	// TopicName registers the schemas under <topic>-value and
	// <topic>-key, with the records named after the topic:
	// <topic>.Envelope and <topic>.Key. Tables that share a topic share
	// its subjects, so their schemas are versions of one subject, which
	// its compatibility level must allow. The default.
	TopicName SubjectStrategy = iota
	// RecordName registers each table's schemas under their records' full
	// names, <namespace>.Envelope and <namespace>.Key, whatever the
	// topic, with the namespace [Config.Namespace.]<schema>.<table>: the
	// tables of one topic then have subjects of their own, and a table's
	// schemas are one subject's versions in every topic it is written to.
	RecordName
	// TopicRecordName registers them under
	// <topic>-<namespace>.Envelope and <topic>-<namespace>.Key, the
	// records named as with RecordName: a subject per table and topic.
	TopicRecordName
)

// String returns the strategy's Confluent name, such as
// "RecordNameStrategy".
func (s SubjectStrategy) String() string {
	switch s {
	case TopicName:
		return "TopicNameStrategy"
	case RecordName:
		return "RecordNameStrategy"
	case TopicRecordName:
		return "TopicRecordNameStrategy"
	}
	return fmt.Sprintf("SubjectStrategy(%d)", uint8(s))
}

// ParseSubjectStrategy returns the strategy of String's name (its case
// ignored).
func ParseSubjectStrategy(name string) (SubjectStrategy, bool) {
	for s := TopicName; s <= TopicRecordName; s++ {
		if strings.EqualFold(name, s.String()) {
			return s, true
		}
	}
	return 0, false
}

// names are the record namespace and subjects of one table version's
// schemas in one topic.
type names struct {
	namespace                string
	valueSubject, keySubject string
}

// namesFor returns the names of e's table's schemas when written to topic.
func (enc *Encoder) namesFor(topic string, e *kafkasink.Event) names {
	if enc.subjects == TopicName {
		return names{namespace: avroNamespace(topic), valueSubject: topic + "-value", keySubject: topic + "-key"}
	}
	ns := avroName(e.Schema) + "." + avroName(e.Table)
	if enc.namespace != "" {
		ns = enc.namespace + "." + ns
	}
	n := names{namespace: ns, valueSubject: ns + ".Envelope", keySubject: ns + ".Key"}
	if enc.subjects == TopicRecordName {
		n.valueSubject, n.keySubject = topic+"-"+n.valueSubject, topic+"-"+n.keySubject
	}
	return n
}

// checkNames returns the problems of cfg's Subjects and Namespace.
func checkNames(cfg *Config) []string {
	var problems []string
	if cfg.Subjects > TopicRecordName {
		problems = append(problems, fmt.Sprintf("kafkasinkavro.Config.Subjects is %s; want TopicName, RecordName or TopicRecordName (-schema-registry-subjects)", cfg.Subjects))
	}
	if cfg.Namespace == "" {
		return problems
	}
	if cfg.Subjects == TopicName {
		problems = append(problems, fmt.Sprintf("kafkasinkavro.Config.Namespace %q applies to the RecordName and TopicRecordName subject strategies only: "+
			"under TopicName the records are named after their topic; set Subjects (-schema-registry-subjects) or leave Namespace (-schema-registry-namespace) empty", cfg.Namespace))
	}
	for _, part := range strings.Split(cfg.Namespace, ".") {
		if part == "" || avroName(part) != part {
			problems = append(problems, fmt.Sprintf("kafkasinkavro.Config.Namespace %q is not an Avro namespace: want dot-separated names of letters, digits and '_', none starting with a digit (-schema-registry-namespace)", cfg.Namespace))
			break
		}
	}
	return problems
}

// newSubjectFix says how to give a table's schemas a new subject, for the
// fix of a refused schema.
func (enc *Encoder) newSubjectFix() string {
	if enc.subjects == RecordName {
		return "name its records anew (kafkasinkavro.Config.Namespace; -schema-registry-namespace)"
	}
	return "route the table to a new topic (kafkasink.Config.Topics; -topic-routes)"
}

// isKeySubject reports whether subject is a key schema's under any
// strategy: <topic>-key, or a record name ending in .Key.
func isKeySubject(subject string) bool {
	return strings.HasSuffix(subject, "-key") || strings.HasSuffix(subject, ".Key")
}
