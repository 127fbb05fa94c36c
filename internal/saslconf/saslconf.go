// Package saslconf is the SASL side of the sink's connections: the
// problems of the settings, the franz-go mechanism they make, and what a
// broker's refusal of them means for the operator.
package saslconf

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The mechanisms, as kafkasink's SASLXxx constants name them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
	AWSMSKIAM   = "AWS_MSK_IAM"
)

// Settings are the fields of kafkasink.SASL, which converts to it; see
// there for what each means.
type Settings struct {
	Mechanism      string
	Username       string
	Password       string
	Token          func(context.Context) (string, error)
	AWS            func(context.Context) (aws.Auth, error)
	AllowPlaintext bool
}

// Problems returns what is wrong with the settings: what the mechanism
// needs and lacks, an unknown mechanism, and PLAIN without TLS (withTLS
// false) unless AllowPlaintext.
func (s Settings) Problems(withTLS bool) []string {
	var p []string
	switch s.Mechanism {
	case Plain, ScramSHA256, ScramSHA512:
		if s.Username == "" || s.Password == "" {
			p = append(p, fmt.Sprintf("SASL %s needs Username and Password", s.Mechanism))
		}
		if s.Mechanism == Plain && !withTLS && !s.AllowPlaintext {
			p = append(p, "SASL PLAIN without TLS sends the password in clear text: set Config.TLS, or SASL.AllowPlaintext if the network is trusted")
		}
	case OAuthBearer:
		if s.Token == nil {
			p = append(p, "SASL OAUTHBEARER needs a Token function")
		}
	case AWSMSKIAM:
		if s.AWS == nil {
			p = append(p, "SASL AWS_MSK_IAM needs an AWS credentials function")
		}
	default:
		p = append(p, fmt.Sprintf("SASL.Mechanism %q is unknown: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM", s.Mechanism))
	}
	return p
}

// SASL builds the franz-go SASL mechanism; nil for a mechanism Problems
// refuses.
func (s Settings) SASL() sasl.Mechanism {
	switch s.Mechanism {
	case Plain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case ScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case ScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	case OAuthBearer:
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			tok, err := s.Token(ctx)
			return oauth.Auth{Token: tok}, err
		})
	case AWSMSKIAM:
		return aws.ManagedStreamingIAM(s.AWS)
	}
	return nil
}

// Explain says, for a connection error that comes from the SASL set-up
// (the broker refused the credentials, or does not enable the mechanism),
// which setting to fix, wrapping err; it returns nil for any other error.
// It only explains: the class of err is the same before and after.
func (s Settings) Explain(err error) error {
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		who, fix := fmt.Sprintf(" of user %q", s.Username), "Config.SASL's credentials"
		switch s.Mechanism {
		case OAuthBearer:
			who, fix = "", "the token Config.SASL.Token returns"
		case AWSMSKIAM:
			who, fix = "", "the credentials Config.SASL.AWS returns"
		}
		return fmt.Errorf("kafkasink: the broker refused SASL %s authentication%s: check %s: %w", s.Mechanism, who, fix, err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("kafkasink: the broker does not enable SASL %s on this listener: choose a mechanism it enables: %w", s.Mechanism, err)
	}
	return nil
}
