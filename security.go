package kafkasink

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/kafkasink/kafkasink/internal/saslconf"
	"github.com/kafkasink/kafkasink/internal/tlsconf"
)

// Secret is a string that never shows itself: fmt, slog and JSON print
// "[redacted]". Use it for passwords.
type Secret string

const redacted = "[redacted]"

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]", for %#v.
func (Secret) GoString() string { return redacted }

// Format prints "[redacted]" for every verb. Without it, a verb that does
// not call String, such as %d, prints the bare value as "%!d(kafkasink.Secret=...)",
// also when the Secret is a field of a printed struct.
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue keeps the secret out of slog output.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText keeps the secret out of encoded configs.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// TLS configures encryption and, with a client certificate, mutual TLS.
// Every field is optional: the zero TLS verifies the broker against the
// system roots.
type TLS struct {
	// CAFile is a PEM file of the certificate authorities to trust
	// instead of the system roots; CAPEM is the same, in memory.
	CAFile string
	CAPEM  []byte
	// CertFile and KeyFile (or CertPEM and KeyPEM) are the client's
	// certificate and key, for brokers that require client
	// authentication (ssl.client.auth=required). Give both or neither.
	// The files are read again for a new connection once either
	// changed, so certificates rotated on disk (cert-manager, Vault
	// agent) are used without a restart; a pair that does not load then
	// fails that connection's handshake, naming the files.
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
	// GetClientCertificate, when set, returns the client certificate for
	// each new connection, instead of the fields above: for certificates
	// kept in memory by the caller and rotated there. It is
	// tls.Config.GetClientCertificate.
	GetClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error) `json:"-"`
	// ServerName overrides the name checked in the broker's certificate;
	// default: the host of the broker address.
	ServerName string
}

// Format prints the TLS settings without the client's private key, for
// every verb.
func (t TLS) Format(f fmt.State, _ rune) {
	key := "none"
	if t.KeyFile != "" {
		key = t.KeyFile
	} else if t.KeyPEM != nil {
		key = redacted
	}
	fmt.Fprintf(f, "kafkasink.TLS{CAFile:%q CAPEM:%t CertFile:%q CertPEM:%t Key:%s GetClientCertificate:%t ServerName:%q}",
		t.CAFile, t.CAPEM != nil, t.CertFile, t.CertPEM != nil, key, t.GetClientCertificate != nil, t.ServerName)
}

// SASLMechanism names a SASL mechanism.
type SASLMechanism string

// The SASL mechanisms the sink supports.
const (
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
	SASLOAuthBearer SASLMechanism = "OAUTHBEARER"
	SASLAWSMSKIAM   SASLMechanism = "AWS_MSK_IAM"
)

// AWSCredentials are what AWS MSK IAM signs with.
type AWSCredentials struct {
	AccessKey    string // the access key id
	SecretKey    Secret // the secret access key
	SessionToken Secret // for temporary credentials; empty otherwise
}

// SASL configures authentication.
type SASL struct {
	// Mechanism is the SASL mechanism to authenticate with, one of the
	// SASLXxx constants; it decides which of the fields below are needed.
	// Required.
	Mechanism SASLMechanism
	// Username and Password for PLAIN and SCRAM.
	Username string
	Password Secret
	// Token returns a bearer token for OAUTHBEARER; it is called for each
	// new connection, so it may refresh.
	Token func(context.Context) (string, error) `json:"-"`
	// AWS returns credentials for AWS_MSK_IAM; called for each new
	// connection.
	AWS func(context.Context) (AWSCredentials, error) `json:"-"`
	// AllowPlaintext permits PLAIN without TLS, which sends the password
	// in clear text. Default false: refused.
	AllowPlaintext bool
}

// securityProblems returns the configuration problems of TLS and SASL.
func (c *Config) securityProblems() []string {
	var p []string
	if c.TLS != nil {
		p = tlsconf.Settings(*c.TLS).Problems()
	}
	if c.SASL != nil {
		p = append(p, c.SASL.settings().Problems(c.TLS != nil)...)
	}
	return p
}

// ClientConfig returns the *tls.Config the sink connects with, for a
// program to give its other clients of the same deployment (a Schema
// Registry's) the same settings, certificate rotation included. Errors
// name the file or field at fault.
func (t *TLS) ClientConfig() (*tls.Config, error) {
	// tlsconf.Settings has TLS's fields: the conversion keeps them the same.
	return tlsconf.Settings(*t).Config()
}

// settings returns s as saslconf takes it, which builds the mechanism
// and checks and explains the settings.
func (s *SASL) settings() saslconf.Settings {
	st := saslconf.Settings{Mechanism: string(s.Mechanism), Username: s.Username, Password: string(s.Password), Token: s.Token, AllowPlaintext: s.AllowPlaintext}
	if s.AWS != nil {
		st.AWS = func(ctx context.Context) (aws.Auth, error) {
			c, err := s.AWS(ctx)
			return aws.Auth{AccessKey: c.AccessKey, SecretKey: string(c.SecretKey), SessionToken: string(c.SessionToken)}, err
		}
	}
	return st
}

// securityOptions are the client options for TLS and SASL; validate has
// checked the config, so building cannot fail here.
func (c *Config) securityOptions() []kgo.Opt {
	var opts []kgo.Opt
	if c.TLS != nil {
		tc, _ := c.TLS.ClientConfig()
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL.settings().SASL()))
	}
	return opts
}

// explainConnectErr says which part of the security set-up a connection
// error comes from, so the message points at the setting to fix. It only
// explains: the class of the error (IsFatal, in classify.go, which knows
// TLS alerts by tlsconf.Alert) is the same before and after.
func (c *Config) explainConnectErr(err error) error {
	if c.SASL != nil {
		if explained := c.SASL.settings().Explain(err); explained != nil {
			return explained
		}
	}
	return tlsconf.Explain(err, (*tlsconf.Settings)(c.TLS))
}
