package saslconf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// TestProblems: each mechanism asks for what it needs, PLAIN without TLS
// only with AllowPlaintext, and an unknown mechanism is named.
func TestProblems(t *testing.T) {
	t.Parallel()
	token := func(context.Context) (string, error) { return "t", nil }
	creds := func(context.Context) (aws.Auth, error) { return aws.Auth{}, nil }
	for _, tc := range []struct {
		name    string
		s       Settings
		withTLS bool
		want    string // a part of the problems; "" for none
	}{
		{"scram", Settings{Mechanism: ScramSHA256, Username: "u", Password: "p"}, false, ""},
		{"scram without password", Settings{Mechanism: ScramSHA512, Username: "u"}, true, "SASL SCRAM-SHA-512 needs Username and Password"},
		{"plain with TLS", Settings{Mechanism: Plain, Username: "u", Password: "p"}, true, ""},
		{"plain without TLS", Settings{Mechanism: Plain, Username: "u", Password: "p"}, false, "sends the password in clear text"},
		{"plain allowed in clear text", Settings{Mechanism: Plain, Username: "u", Password: "p", AllowPlaintext: true}, false, ""},
		{"oauth", Settings{Mechanism: OAuthBearer, Token: token}, true, ""},
		{"oauth without token", Settings{Mechanism: OAuthBearer}, true, "OAUTHBEARER needs a Token function"},
		{"iam", Settings{Mechanism: AWSMSKIAM, AWS: creds}, true, ""},
		{"iam without credentials", Settings{Mechanism: AWSMSKIAM}, true, "AWS_MSK_IAM needs an AWS credentials function"},
		{"unknown", Settings{Mechanism: "GSSAPI"}, true, `SASL.Mechanism "GSSAPI" is unknown`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := strings.Join(tc.s.Problems(tc.withTLS), "; ")
			if tc.want == "" && p != "" || !strings.Contains(p, tc.want) {
				t.Errorf("Problems(%t) = %q, want %q", tc.withTLS, p, tc.want)
			}
			if m := tc.s.SASL(); tc.want == "" && (m == nil || m.Name() != tc.s.Mechanism) {
				t.Errorf("SASL() = %v, want the mechanism %s", m, tc.s.Mechanism)
			}
		})
	}
}

// TestExplain: a refusal of the credentials names the user, or the
// function that supplies them, and an unsupported mechanism names it;
// both wrap the broker's error, and any other error is not explained.
func TestExplain(t *testing.T) {
	t.Parallel()
	failed := fmt.Errorf("connecting: %w", kerr.SaslAuthenticationFailed)
	for _, tc := range []struct {
		s    Settings
		err  error
		want string // "" when Explain returns nil
	}{
		{Settings{Mechanism: ScramSHA256, Username: "cdc"}, failed, `refused SASL SCRAM-SHA-256 authentication of user "cdc": check Config.SASL's credentials`},
		{Settings{Mechanism: OAuthBearer}, failed, "refused SASL OAUTHBEARER authentication: check the token Config.SASL.Token returns"},
		{Settings{Mechanism: AWSMSKIAM}, failed, "refused SASL AWS_MSK_IAM authentication: check the credentials Config.SASL.AWS returns"},
		{Settings{Mechanism: Plain}, kerr.UnsupportedSaslMechanism, "does not enable SASL PLAIN on this listener"},
		{Settings{Mechanism: Plain}, errors.New("dial tcp: connection refused"), ""},
	} {
		got := tc.s.Explain(tc.err)
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("Explain(%v) = %v, want nil", tc.err, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want) || !errors.Is(got, tc.err)):
			t.Errorf("Explain(%v) = %v, want %q wrapping the error", tc.err, got, tc.want)
		}
	}
}
