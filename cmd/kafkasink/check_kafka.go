package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
)

// kafkaChecks runs the Kafka checks with a client of the sink's own
// connection options (its principal), which reads metadata and
// configurations and tries rights only where trying changes nothing.
type kafkaChecks struct {
	t        checkTarget
	cl       *kgo.Client
	adm      *kadm.Client
	findings []finding
}

func (c *kafkaChecks) add(f finding) {
	f.Area = "kafka"
	c.findings = append(c.findings, f)
}

// checkKafka checks the brokers, the principal's rights, the transaction
// timeout and the checkpoint topic of t.
func checkKafka(ctx context.Context, t checkTarget) []finding {
	c := &kafkaChecks{t: t}
	opts, err := t.kcfg.ConnOptions()
	if err == nil {
		c.cl, err = kgo.NewClient(opts...)
	}
	if err != nil {
		c.add(finding{Check: "connection", Status: statusFail, Detail: err.Error(), Fix: "check -brokers and the TLS and SASL flags"})
		return c.findings
	}
	defer c.cl.Close()
	c.adm = kadm.NewClient(c.cl)
	meta, err := c.adm.BrokerMetadata(ctx)
	if err == nil && len(meta.Brokers) == 0 {
		err = errors.New("the cluster lists no brokers")
	}
	if err != nil {
		c.add(finding{Check: "connection", Status: statusFail, Detail: speakFlags(err.Error()),
			Fix: "check -brokers (reachable from here, the listener's address), -tls-* and -sasl-*"})
		return c.findings
	}
	c.add(finding{Check: "connection", Status: statusOK, Detail: "brokers " + strings.Join(t.kcfg.Brokers, ",")})
	c.transactions(ctx, meta.Brokers[0].NodeID)
	c.idempotentWrite(ctx)
	c.checkpointTopic(ctx)
	c.outputTopics(ctx)
	return c.findings
}

// authorizer reports whether the cluster checks ACLs: a cluster without
// an authorizer answers DescribeACLs with SECURITY_DISABLED.
func (c *kafkaChecks) authorizer(ctx context.Context) bool {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, c.cl)
	return err != nil || kerr.ErrorForCode(resp.ErrorCode) != kerr.SecurityDisabled
}

// transactions checks, in exactly-once mode, the transactional id's
// rights and the broker's transaction.max.timeout.ms. Claiming the id
// would fence a running instance, so WRITE is inferred: DESCRIBE (which
// WRITE implies) is tried by finding the id's coordinator, and without
// an authorizer every principal has both. The timeout is broker's, one
// of the cluster's (a broker's static settings are its own).
func (c *kafkaChecks) transactions(ctx context.Context, broker int32) {
	if c.t.kcfg.Mode != kafkasink.ExactlyOnce {
		return
	}
	txnID := c.t.kcfg.TransactionalID
	if txnID == "" {
		txnID = "kafkasink-" + c.t.kcfg.SinkID
	}
	fix := fmt.Sprintf("grant WRITE and DESCRIBE on TransactionalId %q to the sink's principal (kafka-acls --add --allow-principal User:... --operation Write --operation Describe --transactional-id %s)", txnID, txnID)
	resp := c.adm.FindTxnCoordinators(ctx, txnID)[txnID]
	switch {
	case errors.Is(resp.Err, kerr.TransactionalIDAuthorizationFailed):
		c.add(finding{Check: "transactional id ACL", Status: statusFail, BlocksStart: true,
			Detail: fmt.Sprintf("the principal may not use transactional id %q: %v", txnID, resp.Err), Fix: fix})
	case resp.Err != nil:
		c.add(finding{Check: "transactional id ACL", Status: statusUnknown,
			Detail: fmt.Sprintf("finding the coordinator of transactional id %q: %v", txnID, resp.Err), Fix: "rerun kafkasink check once the brokers answer"})
	case !c.authorizer(ctx):
		c.add(finding{Check: "transactional id ACL", Status: statusOK, Detail: fmt.Sprintf("no authorizer: any principal may use transactional id %q", txnID)})
	default:
		c.add(finding{Check: "transactional id ACL", Status: statusUnknown,
			Detail: fmt.Sprintf("DESCRIBE on transactional id %q is granted; WRITE cannot be tried without fencing a running instance", txnID), Fix: fix})
	}

	brokers, err := c.adm.DescribeBrokerConfigs(ctx, broker)
	var max string
	if err == nil && len(brokers) > 0 && brokers[0].Err == nil {
		for _, cfg := range brokers[0].Configs {
			if cfg.Key == "transaction.max.timeout.ms" && cfg.Value != nil {
				max = *cfg.Value
			}
		}
	}
	ms, perr := strconv.ParseInt(max, 10, 64)
	if max == "" || perr != nil {
		if err == nil && len(brokers) > 0 {
			err = brokers[0].Err
		}
		c.add(finding{Check: "transaction timeout", Status: statusUnknown,
			Detail: fmt.Sprintf("cannot read the broker's transaction.max.timeout.ms: %v", err),
			Fix:    "grant DESCRIBE_CONFIGS on the cluster, or compare -transaction-timeout with the broker's transaction.max.timeout.ms yourself"})
		return
	}
	timeout := c.t.kcfg.TransactionTimeout
	if timeout == 0 {
		timeout = kafkasink.DefaultTransactionTimeout
	}
	if limit := time.Duration(ms) * time.Millisecond; timeout > limit {
		c.add(finding{Check: "transaction timeout", Status: statusFail, BlocksStart: true,
			Detail: fmt.Sprintf("-transaction-timeout %v is above the broker's transaction.max.timeout.ms %v", timeout, limit),
			Fix:    fmt.Sprintf("lower -transaction-timeout to %v or less, or raise the brokers' transaction.max.timeout.ms", limit)})
		return
	}
	c.add(finding{Check: "transaction timeout", Status: statusOK, Detail: fmt.Sprintf("%v, within the broker's transaction.max.timeout.ms %dms", timeout, ms)})
}

// idempotentWrite checks, in idempotent mode, that the principal may
// write idempotently: asking for a producer id without a transactional
// id needs IDEMPOTENT_WRITE on the cluster (or WRITE on a topic) and
// changes nothing anyone else sees.
func (c *kafkaChecks) idempotentWrite(ctx context.Context) {
	if c.t.kcfg.Mode != kafkasink.Idempotent {
		return
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		c.add(finding{Check: "idempotent write ACL", Status: statusFail, BlocksStart: true, Detail: err.Error(),
			Fix: "grant IDEMPOTENT_WRITE on the cluster to the sink's principal (kafka-acls --add --allow-principal User:... --operation IdempotentWrite --cluster)"})
	case err != nil:
		c.add(finding{Check: "idempotent write ACL", Status: statusUnknown, Detail: err.Error(), Fix: "rerun kafkasink check once the brokers answer"})
	default:
		c.add(finding{Check: "idempotent write ACL", Status: statusOK, Detail: "granted"})
	}
}

// checkpointTopic checks the checkpoint topic: the principal may see it,
// and it is compacted and keeps acks=all writable; when it is missing,
// that the principal may create it (asked with validate-only, which
// creates nothing).
func (c *kafkaChecks) checkpointTopic(ctx context.Context) {
	topic := c.t.kcfg.CheckpointTopic
	if topic == "" {
		topic = kafkasink.DefaultCheckpointTopic
	}
	check := "checkpoint topic " + topic
	d, missing, err := c.describeTopic(ctx, topic)
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		c.add(finding{Check: check, Status: statusFail, BlocksStart: true, Detail: "the principal may not describe it: " + err.Error(),
			Fix: fmt.Sprintf("grant DESCRIBE, READ and WRITE on topic %q to the sink's principal", topic)})
		return
	case err != nil:
		c.add(finding{Check: check, Status: statusUnknown, Detail: err.Error(), Fix: "rerun kafkasink check once the brokers answer"})
		return
	case missing:
		c.canCreate(ctx, check, topic, "compacted (cleanup.policy=compact)")
		return
	}
	c.topicSettings(ctx, check, topic, d)
}

// canCreate reports whether the principal may create topic, which is
// missing, by a validate-only CreateTopics; how says how the sink would
// create it.
func (c *kafkaChecks) canCreate(ctx context.Context, check, topic, how string) {
	resp, err := c.adm.ValidateCreateTopics(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp[topic].Err
	}
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		c.add(finding{Check: check, Status: statusFail, BlocksStart: true,
			Detail: fmt.Sprintf("missing, and the principal may not create it: %v", err),
			Fix:    fmt.Sprintf("create it, %s, or grant CREATE on topic %q or on the cluster to the sink's principal", how, topic)})
	case err != nil:
		c.add(finding{Check: check, Status: statusFail, Detail: fmt.Sprintf("missing, and the broker refuses to create it: %v", err),
			Fix: fmt.Sprintf("create it yourself, %s", how)})
	default:
		c.add(finding{Check: check, Status: statusOK, Detail: "missing; the sink creates it, " + how})
	}
}

// outputTopics checks the topic of each table of -tables: the principal
// may describe it, and create it when it is missing (the program always
// lets the sink create topics). Without -tables the tables are the
// publication's, which only PostgreSQL knows: not checked.
func (c *kafkaChecks) outputTopics(ctx context.Context) {
	if len(c.t.pcfg.Tables) == 0 {
		c.add(finding{Check: "output topics", Status: statusUnknown, Detail: "-tables is empty (the publication's tables): their topics are not checked",
			Fix: "list the tables in -tables to have their topics checked"})
		return
	}
	for _, name := range c.t.pcfg.Tables {
		schema, table, err := kafkasink.ParseTableName(name)
		if err != nil {
			continue // configs has refused it
		}
		if schema == "" {
			schema = "public"
		}
		topic, err := c.t.kcfg.TopicFor(schema, table)
		if err != nil {
			// Not blocking: the sink rejects the table's events as
			// they come (to -dead-letter-topic when set), and
			// streams the other tables.
			c.add(finding{Check: "topic of " + name, Status: statusFail, Detail: speakFlags(err.Error()),
				Fix: "route the table with -topic-routes; until then its events are rejected (to -dead-letter-topic when set)"})
			continue
		}
		check := "topic " + topic
		d, missing, err := c.describeTopic(ctx, topic)
		switch {
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			c.add(finding{Check: check, Status: statusFail, BlocksStart: true, Detail: "the principal may not describe it: " + err.Error(),
				Fix: fmt.Sprintf("grant DESCRIBE and WRITE on topic %q (and CREATE, unless it exists) to the sink's principal", topic)})
		case err != nil:
			c.add(finding{Check: check, Status: statusUnknown, Detail: err.Error(), Fix: "rerun kafkasink check once the brokers answer"})
		case missing:
			c.canCreate(ctx, check, topic, "with the -partitions and -replication-factor it is given")
		default:
			c.add(finding{Check: check, Status: statusOK, Detail: fmt.Sprintf("exists, %d partitions", len(d.Partitions))})
		}
	}
}

// describeTopic reads topic's metadata: whether it is missing, or the
// error of the request or of the topic (TOPIC_AUTHORIZATION_FAILED when
// the principal may not describe it, which kadm reports either way).
func (c *kafkaChecks) describeTopic(ctx context.Context, topic string) (kadm.TopicDetail, bool, error) {
	details, err := c.adm.ListTopics(ctx, topic)
	if err != nil {
		return kadm.TopicDetail{}, false, err
	}
	d, ok := details[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return d, true, nil
	case d.Err != nil:
		return d, false, d.Err
	}
	return d, false, nil
}

// topicSettings checks an existing checkpoint topic's cleanup policy and
// its min.insync.replicas against its replication factor.
func (c *kafkaChecks) topicSettings(ctx context.Context, check, topic string, d kadm.TopicDetail) {
	configs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	var rc kadm.ResourceConfig
	if err == nil {
		rc, err = configs.On(topic, nil)
	}
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		c.add(finding{Check: check, Status: statusUnknown, Detail: "cannot read its configuration: " + err.Error(),
			Fix: fmt.Sprintf("grant DESCRIBE_CONFIGS on topic %q to the sink's principal", topic)})
		return
	}
	value := func(key string) string {
		for _, cfg := range rc.Configs {
			if cfg.Key == key && cfg.Value != nil {
				return *cfg.Value
			}
		}
		return ""
	}
	rf := len(d.Partitions[0].Replicas)
	minISR, _ := strconv.Atoi(value("min.insync.replicas"))
	var problems, fixes []string
	if policy := value("cleanup.policy"); policy != "compact" {
		problems = append(problems, fmt.Sprintf("cleanup.policy is %q: retention can delete the latest checkpoint, and the sink would start over", policy))
		fixes = append(fixes, fmt.Sprintf("kafka-configs --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact", topic))
	}
	if minISR > rf {
		problems = append(problems, fmt.Sprintf("min.insync.replicas %d is above its replication factor %d: no acks=all write can succeed", minISR, rf))
		fixes = append(fixes, fmt.Sprintf("lower its min.insync.replicas to %d or less", rf))
	}
	if problems != nil {
		c.add(finding{Check: check, Status: statusFail, BlocksStart: c.t.kcfg.Mode == kafkasink.ExactlyOnce,
			Detail: strings.Join(problems, "; "), Fix: strings.Join(fixes, "; ")})
		return
	}
	if rf > 1 && minISR < 2 {
		c.add(finding{Check: check, Status: statusWarn,
			Detail: fmt.Sprintf("replication factor %d with min.insync.replicas %d: an acks=all write may rest on one replica", rf, minISR),
			Fix:    "set min.insync.replicas=2 on it"})
		return
	}
	c.add(finding{Check: check, Status: statusOK, Detail: fmt.Sprintf("compacted, replication factor %d, min.insync.replicas %d", rf, minISR)})
}
