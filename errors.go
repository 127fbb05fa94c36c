package kafkasink

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kafkasink/kafkasink/internal/ctxerr"
)

// Sentinel errors. Test for them with errors.Is: they are usually wrapped in
// an error that says more.
var (
	// ErrClosed is returned by Write after Close. Fatal.
	ErrClosed = errors.New("kafkasink: sink closed")

	// ErrFenced is returned by Write when another sink with the same
	// transactional id has started: this one is a zombie and stays
	// stopped, every later Write returns ErrFenced too. Fatal.
	ErrFenced = errors.New("kafkasink: fenced: another sink with the same transactional id took over; stop this instance")

	// ErrConcurrentWrite is returned by a Write called while another Write
	// of the same sink is running. Write is not safe for concurrent use.
	ErrConcurrentWrite = errors.New("kafkasink: Write called while another Write is running; Write is not safe for concurrent use")

	// ErrInvalidBatch is returned by Write for a batch the sink cannot
	// accept as given: an event without a table or with an invalid Op,
	// positions not strictly increasing. Nothing of the batch is written.
	// Fatal: the same batch would fail again.
	ErrInvalidBatch = errors.New("kafkasink: invalid batch")

	// ErrTopicMissing is returned when a destination topic does not exist
	// and the sink may not create it, or was deleted while the sink ran.
	// Fatal.
	ErrTopicMissing = errors.New("kafkasink: topic does not exist")

	// ErrTransactionTimeout is returned by Write when a transaction ran
	// longer than Config.TransactionTimeout allows, so the broker aborts
	// or would abort it. Nothing of it is visible; the next Write recovers.
	// Retryable; lower Config.MaxTransactionRecords if it repeats.
	ErrTransactionTimeout = errors.New("kafkasink: transaction ran out of its transaction timeout")

	// ErrTransactionAborted is returned by Write when a commit failed or
	// its outcome was unknown, and reading the checkpoint back showed the
	// transaction did not commit: it is aborted and invisible. Retryable.
	ErrTransactionAborted = errors.New("kafkasink: transaction aborted, nothing of it is visible")

	// ErrCheckpoint is returned by New (and by Write when it re-reads the
	// checkpoint) when the checkpoint topic holds a record this sink
	// cannot trust: an unknown format version, an unparsable value, or a
	// position that moves backwards; and by Write when a checkpoint the
	// broker confirmed is no longer there (the broker lost a committed
	// transaction, or truncated the log), or when records of a committed
	// transaction are gone from a data partition (the broker skipped the
	// transaction's commit markers there and a later abort took them; the
	// error names the partitions, offsets and events, and the last
	// verified checkpoint to resume from). Fatal.
	ErrCheckpoint = errors.New("kafkasink: checkpoint unusable")

	// ErrUnsafeCheckpointTopic is returned by New in exactly-once mode
	// when the checkpoint topic's settings could delete the latest
	// checkpoint. Fatal.
	ErrUnsafeCheckpointTopic = errors.New("kafkasink: unsafe checkpoint topic")

	// ErrUnexpected wraps an error New or Write met that is in no class
	// the sink knows, such as a broker answer Kafka does not mark
	// retriable that cannot be pinned to one record (a record the broker
	// refuses on its own, INVALID_RECORD or POLICY_VIOLATION, is
	// dead-lettered or rejected instead). Fatal: stopping is safe,
	// retrying blindly might not be; the wrapped error says what
	// happened.
	ErrUnexpected = errors.New("kafkasink: unexpected error, stopping")
)

// The causes of the deadlines the sink sets itself: retryable.
var (
	errCommitTimeout   = &ctxerr.Timeout{What: "commit (Config.CommitTimeout)"}
	errAbortTimeout    = &ctxerr.Timeout{What: "abort (Config.CommitTimeout)"}
	errRecoveryTimeout = &ctxerr.Timeout{What: "reading the checkpoint back after an unclear outcome (Config.TransactionTimeout)"}
)

// ConfigError lists every problem New found in a Config. Fatal. Write
// returns one too when the configuration routes two tables to one topic by
// accident (see Topics), which only the events show.
type ConfigError struct {
	Problems []string // one per problem, naming the Config field and the fix
}

// Error lists the problems.
func (e *ConfigError) Error() string {
	return "kafkasink: invalid config: " + strings.Join(e.Problems, "; ")
}

// WriteError is a failed Write of records to Kafka. It names the first
// record that failed; the rest of its transaction failed with it.
// Whether it is retryable depends on Err: test with IsRetryable and IsFatal.
type WriteError struct {
	Topic     string   // the failed record's topic
	Partition int32    // -1 when the record was never assigned a partition
	Position  Position // its event's position; the checkpoint's for the checkpoint record
	Err       error    // the client's or the broker's error
}

// Error names the event, the topic and the partition, then the cause.
func (e *WriteError) Error() string {
	return fmt.Sprintf("kafkasink: writing event %s to %s[%d]: %v", e.Position, e.Topic, e.Partition, e.Err)
}

// Unwrap returns Err.
func (e *WriteError) Unwrap() error { return e.Err }

// Reason says why an event was rejected.
type Reason string

// The reasons an event can be rejected. They are also the values of the
// kafkasink.reason header on dead-lettered records.
const (
	ReasonUnencodable Reason = "unencodable" // the Encoder refused a value
	ReasonUnroutable  Reason = "unroutable"  // no valid topic name for the event's table
	ReasonNoKey       Reason = "no_key"      // a key column is missing from the row, or a keyless row's topic is compacted
	ReasonTooLarge    Reason = "too_large"   // the record exceeds the topic's max.message.bytes, by the sink's check or the broker's
	ReasonRefused     Reason = "refused"     // the broker refused the record on its own (INVALID_RECORD, INVALID_TIMESTAMP, POLICY_VIOLATION)
)

// Rejection is one event the sink could not deliver to its topic.
type Rejection struct {
	Position Position // the event's position
	Schema   string   // the event's schema
	Table    string   // the event's table
	Topic    string   // the intended topic; "" when unroutable
	Reason   Reason   // why it was rejected
	Err      error    // what went wrong, naming the column or topic at fault
}

// String names the event, its table and the reason.
func (r *Rejection) String() string {
	return fmt.Sprintf("event %s of %s (%s): %v", r.Position, TableName(r.Schema, r.Table), r.Reason, r.Err)
}

// RejectedError is returned by Write when events of the batch cannot be
// delivered and no dead-letter topic is configured. Nothing of the batch is
// committed and the checkpoint does not move: in ExactlyOnce mode the
// records encoded before the rejected event may have been sent, in a
// transaction the sink then aborted; the other modes send nothing of a
// rejected batch. A record the broker refused (ReasonRefused, or
// ReasonTooLarge by the broker's limit) is found only once its part was
// sent: the parts before it are committed, and the checkpoint says how
// far; in the other modes the rest of its part may be written, and is
// written again with the batch, the duplicates those modes allow. It is
// neither retryable nor fatal in itself: the same batch fails again until
// the events are fixed, skipped by the caller, or a dead-letter topic is
// configured.
type RejectedError struct {
	Rejections []Rejection // every rejected event of the batch, in order
}

// Error names the first three rejected events and counts the rest.
func (e *RejectedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kafkasink: %d event(s) rejected, batch not written (set Config.DeadLetterTopic to divert them instead): ", len(e.Rejections))
	for i := range e.Rejections {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Rejections)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Rejections[i].String())
	}
	return b.String()
}

// PrepareError is what an Encoder's Prepare (see Preparer) returns for a
// failure, and Write then: the batch was not written, and nothing of it
// was sent. Retryable says whether the same batch may succeed later (a
// Schema Registry that is down or answers 5xx); otherwise it is fatal (a
// schema the registry refuses as incompatible: the fix is a change of
// the table or of the registry's compatibility setting).
type PrepareError struct {
	Retryable bool
	Err       error // what failed, naming the table, and the fix
}

// Error returns Err's text.
func (e *PrepareError) Error() string { return "kafkasink: preparing the batch: " + e.Err.Error() }

// Unwrap returns Err.
func (e *PrepareError) Unwrap() error { return e.Err }

// EncodeError is returned by an Encoder, or by key rendering, for a value it
// cannot encode. It names the table and the column.
type EncodeError struct {
	Schema string // the event's schema
	Table  string // the event's table
	Column string // the column whose value could not be encoded
	Err    error  // why the value could not be encoded
}

// Error names the table and the column, then the cause.
func (e *EncodeError) Error() string {
	return fmt.Sprintf("kafkasink: cannot encode %s.%s column %q: %v", e.Schema, e.Table, e.Column, e.Err)
}

// Unwrap returns Err.
func (e *EncodeError) Unwrap() error { return e.Err }
