// Package tlsconf is the TLS side of the sink's connections: it builds
// the *tls.Config from certificate files or memory, reading a client
// certificate again once its files change, and reads the TLS alert a
// broker ends a handshake with, which crypto/tls does not surface as a
// tls.AlertError over TCP.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sync"
	"time"
)

// Settings are the fields of kafkasink.TLS, which converts to it; see
// there for what each means.
type Settings struct {
	CAFile               string
	CAPEM                []byte
	CertFile, KeyFile    string
	CertPEM, KeyPEM      []byte
	GetClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	ServerName           string
}

// Problems returns what is wrong with the settings: fields that conflict,
// and files or PEM that do not load.
func (t Settings) Problems() []string {
	var p []string
	if t.CAFile != "" && t.CAPEM != nil {
		p = append(p, "TLS.CAFile and TLS.CAPEM are both set: use one")
	}
	file := t.CertFile != "" || t.KeyFile != ""
	mem := t.CertPEM != nil || t.KeyPEM != nil
	switch {
	case file && mem:
		p = append(p, "TLS has both CertFile/KeyFile and CertPEM/KeyPEM: use one pair")
	case file && (t.CertFile == "" || t.KeyFile == ""):
		p = append(p, "TLS.CertFile and TLS.KeyFile must be given together")
	case mem && (t.CertPEM == nil || t.KeyPEM == nil):
		p = append(p, "TLS.CertPEM and TLS.KeyPEM must be given together")
	}
	if t.GetClientCertificate != nil && (file || mem) {
		p = append(p, "TLS.GetClientCertificate and a client certificate (CertFile/KeyFile or CertPEM/KeyPEM) are both set: use one")
	}
	if _, err := t.Config(); err != nil {
		p = append(p, err.Error())
	}
	return p
}

// Config builds the *tls.Config. Errors name the file or field at fault.
func (t Settings) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	ca := t.CAPEM
	if t.CAFile != "" {
		b, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("TLS.CAFile: %v", err)
		}
		ca = b
	}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("TLS CA (%s): no PEM certificate found", orMemory(t.CAFile))
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.GetClientCertificate != nil:
		cfg.GetClientCertificate = t.GetClientCertificate
	case t.CertFile != "" && t.KeyFile != "":
		files := &certFiles{cert: t.CertFile, key: t.KeyFile}
		if _, err := files.load(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return files.load() }
	case t.CertPEM != nil && t.KeyPEM != nil:
		pair, err := tls.X509KeyPair(t.CertPEM, t.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate (in memory): %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// certFiles is a client certificate read from files, read again when either
// file changed since the last read.
type certFiles struct {
	cert, key string

	mu       sync.Mutex
	pair     *tls.Certificate
	modified [2]time.Time // of cert and key when pair was read
}

// load returns the pair, read again if either file changed.
func (c *certFiles) load() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var modified [2]time.Time
	for i, name := range []string{c.cert, c.key} {
		fi, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %v", err)
		}
		modified[i] = fi.ModTime()
	}
	if c.pair != nil && modified == c.modified {
		return c.pair, nil
	}
	cert, err := os.ReadFile(c.cert)
	if err != nil {
		return nil, fmt.Errorf("TLS.CertFile: %v", err)
	}
	key, err := os.ReadFile(c.key)
	if err != nil {
		return nil, fmt.Errorf("TLS.KeyFile: %v", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("TLS client certificate (%s, %s): %v", c.cert, c.key, err)
	}
	c.pair, c.modified = &pair, modified
	return c.pair, nil
}

func orMemory(file string) string {
	if file == "" {
		return "in memory"
	}
	return file
}

// Alert returns the TLS alert that ended a handshake. Over TCP,
// crypto/tls reports an alert from the peer as a *net.OpError "remote
// error" holding an unexported type, not as tls.AlertError.
func Alert(err error) (tls.AlertError, bool) {
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return alert, true
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return 0, false
	}
	v := reflect.ValueOf(op.Err)
	if v.Kind() != reflect.Uint8 || v.Type().PkgPath() != "crypto/tls" {
		return 0, false
	}
	return tls.AlertError(v.Uint()), true
}

// Explain says which TLS setting a connection error points at, so that
// the message names the setting to fix; t is the sink's settings, nil
// when it has none (a broker's alert then explains nothing). It only
// explains: the class of the error is the same before and after.
func Explain(err error, t *Settings) error {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		verify           *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &hostname):
		return fmt.Errorf("kafkasink: the broker's TLS certificate does not name the host dialled: set Config.TLS.ServerName to a name it has: %w", err)
	case errors.As(err, &unknownAuthority) || errors.As(err, &verify):
		return fmt.Errorf("kafkasink: the broker's TLS certificate is not trusted: set Config.TLS.CAFile to the authority that signed it: %w", err)
	}
	alert, ok := Alert(err)
	if !ok || t == nil {
		return err
	}
	e := &AlertError{Alert: alert, Err: err}
	switch {
	case !clientCertAlerts[alert]:
		e.Msg = fmt.Sprintf("kafkasink: the broker ended the TLS handshake (%v): check Config.TLS against the listener's TLS settings", alert)
	case t.CertFile == "" && t.CertPEM == nil:
		e.Msg = fmt.Sprintf("kafkasink: the broker refused the connection without a client certificate (%v): it requires one: set Config.TLS.CertFile and KeyFile", alert)
	default:
		e.Msg = fmt.Sprintf("kafkasink: the broker refused the client certificate (%v): check Config.TLS.CertFile and KeyFile against the broker's truststore", alert)
	}
	return e
}

// clientCertAlerts are the alerts a server sends about the client's
// certificate, or its absence.
var clientCertAlerts = map[tls.AlertError]bool{
	42:  true, // bad_certificate: also what Java sends for a missing certificate
	43:  true, // unsupported_certificate
	44:  true, // certificate_revoked
	45:  true, // certificate_expired
	46:  true, // certificate_unknown
	48:  true, // unknown_ca
	116: true, // certificate_required
}

// AlertError explains a TLS alert from the broker. It unwraps to the
// tls.AlertError as well as to the original error, so that a classifier
// that knows either knows it.
type AlertError struct {
	Msg   string // what the alert means, and the setting to check
	Alert tls.AlertError
	Err   error // the error the alert came in
}

func (e *AlertError) Error() string   { return e.Msg + ": " + e.Err.Error() }
func (e *AlertError) Unwrap() []error { return []error{e.Alert, e.Err} }
