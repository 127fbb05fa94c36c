// Package brokererr says what the errors of the brokers and of the
// connections to them mean for a retry: a broker code Kafka marks
// retriable or a lost connection may pass when the request is sent again;
// fencing, authentication and authorisation failures, and a TLS
// handshake that failed cannot. The sink's own verdicts (its sentinels,
// its deadlines, the caller's context) are the caller's, and come first.
package brokererr

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkasink/kafkasink/internal/tlsconf"
)

// Retriable reports whether err may pass when the same request is sent
// again: a broker code Kafka marks retriable, TRANSACTION_ABORTABLE and
// UNKNOWN_SERVER_ERROR (the transaction is aborted and may be written
// again), a connection lost, refused or reset, a network error.
func Retriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || ke == kerr.TransactionAbortable || ke == kerr.UnknownServerError
	}
	var ne net.Error
	return errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne)
}

// fatalCodes are the broker answers after which retrying cannot help.
var fatalCodes = []*kerr.Error{
	kerr.ProducerFenced,
	kerr.InvalidProducerEpoch,
	kerr.TransactionalIDAuthorizationFailed,
	kerr.TopicAuthorizationFailed,
	kerr.ClusterAuthorizationFailed,
	kerr.GroupAuthorizationFailed,
	kerr.SaslAuthenticationFailed,
	kerr.UnsupportedSaslMechanism,
	kerr.IllegalSaslState,
	kerr.InvalidTransactionTimeout,
	kerr.UnsupportedForMessageFormat,
	kerr.UnsupportedCompressionType,
	kerr.InvalidTopicException,
	kerr.InvalidRequiredAcks,
}

// Fatal reports whether err is an answer after which retrying cannot
// help: fencing, authentication and authorisation failures, settings the
// broker refuses, a broker certificate not trusted or not for the host
// dialled, a TLS alert that ended the handshake.
func Fatal(err error) bool {
	for _, ke := range fatalCodes {
		if errors.Is(err, ke) {
			return true
		}
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		certInvalid      x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	_, alert := tlsconf.Alert(err) // the broker ended the handshake: retrying cannot help
	return alert || errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &certInvalid) || errors.As(err, &verify)
}

// Fencing reports whether err is the broker's answer to a producer whose
// epoch was replaced, or an INVALID_TXN_STATE answer its caller marked as
// the end of the producer's transaction at the broker (TxnEndedAtBroker).
func Fencing(err error) bool {
	var ended txnEndedAtBroker
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) || errors.As(err, &ended)
}

// TxnEndedAtBroker marks err, when it is INVALID_TXN_STATE, as the answer
// to a commit whose transaction had ended at the broker, or as the client's
// producer id failing with that answer afterwards: Fencing reports it.
// Kafka 4.4 (transaction version 2) answers a commit so after an older
// instance's re-initialisation made the coordinator abort the transaction
// and bump the epoch; franz-go then fails its producer id with that error
// for good, as after PRODUCER_FENCED. The same code answering a produce
// (a partition not in the transaction) is no such evidence, and the caller
// leaves it unmarked. err's text is unchanged.
func TxnEndedAtBroker(err error) error {
	if !errors.Is(err, kerr.InvalidTxnState) {
		return err
	}
	return txnEndedAtBroker{err}
}

type txnEndedAtBroker struct{ error }

func (e txnEndedAtBroker) Unwrap() error { return e.error }
