package kafkasink_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The security tests run against the single node of scripts/testenv.sh:
// its SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
// with Kafka's unsecured JWS validator) and its SSL listener that requires
// a client certificate. Records are read back over the PLAINTEXT listener of
// the same broker.

// securityEnv is what the security tests use of the test environment.
type securityEnv struct {
	plaintext, saslSSL, mtls  []string // listeners of the single node
	user                      string
	pass                      kafkasink.Secret
	caFile, certFile, keyFile string // the client certificate is for mTLS
}

// loadSecurityEnv reads the security variables of scripts/testenv.sh, or
// skips t naming every one that is unset.
func loadSecurityEnv(t *testing.T) securityEnv {
	t.Helper()
	v := sinktest.Env(t, sinktest.EnvBrokers, sinktest.EnvSASLSSL, sinktest.EnvMTLS, sinktest.EnvSASLUser,
		sinktest.EnvSASLPassword, sinktest.EnvCA, sinktest.EnvClientCert, sinktest.EnvClientKey)
	return securityEnv{
		plaintext: strings.Split(v[0], ","), saslSSL: strings.Split(v[1], ","), mtls: strings.Split(v[2], ","),
		user: v[3], pass: kafkasink.Secret(v[4]),
		caFile: v[5], certFile: v[6], keyFile: v[7],
	}
}

// unsecuredJWT is a token Kafka's built-in unsecured validator
// (OAuthBearerUnsecuredValidatorCallbackHandler) accepts: header alg "none",
// a string "sub" (the principal), a numeric "exp" in the future, an optional
// numeric "iat" not in the future, an empty signature. Each part is
// base64url without padding.
func unsecuredJWT(sub string, now time.Time, life time.Duration) string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none"}) + "." +
		enc(map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(life).Unix(), "scope": ""}) + "."
}

func TestSecurityCombinations(t *testing.T) {
	env := loadSecurityEnv(t)
	plaintext, saslSSL, mtls := env.plaintext, env.saslSSL, env.mtls
	user, pass, caFile := env.user, env.pass, env.caFile
	readFile := func(name string) []byte {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caPEM, certPEM, keyPEM := readFile(caFile), readFile(env.certFile), readFile(env.keyFile)

	var tokens, certificates atomic.Int32
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		brokers []string
		tls     *kafkasink.TLS
		sasl    *kafkasink.SASL
	}{
		{"SASL_SSL-PLAIN", saslSSL, &kafkasink.TLS{CAFile: caFile},
			&kafkasink.SASL{Mechanism: kafkasink.SASLPlain, Username: user, Password: pass}},
		{"SASL_SSL-SCRAM-SHA-256", saslSSL, &kafkasink.TLS{CAFile: caFile},
			&kafkasink.SASL{Mechanism: kafkasink.SASLScramSHA256, Username: user, Password: pass}},
		{"SASL_SSL-SCRAM-SHA-512", saslSSL, &kafkasink.TLS{CAFile: caFile},
			&kafkasink.SASL{Mechanism: kafkasink.SASLScramSHA512, Username: user, Password: pass}},
		{"SASL_SSL-OAUTHBEARER", saslSSL, &kafkasink.TLS{CAPEM: caPEM},
			&kafkasink.SASL{Mechanism: kafkasink.SASLOAuthBearer, Token: func(context.Context) (string, error) {
				tokens.Add(1)
				return unsecuredJWT("kafkasink", time.Now(), time.Hour), nil
			}}},
		{"SSL-mTLS", mtls, &kafkasink.TLS{CAFile: caFile, CertFile: env.certFile, KeyFile: env.keyFile}, nil},
		// The brokers are dialled by IP; the certificate is checked for
		// the name "localhost" instead. The in-memory PEM fields too.
		{"SSL-mTLS-ServerName-localhost", mtls, &kafkasink.TLS{CAPEM: caPEM, CertPEM: certPEM, KeyPEM: keyPEM, ServerName: "localhost"}, nil},
		{"SSL-mTLS-GetClientCertificate", mtls, &kafkasink.TLS{CAPEM: caPEM, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			certificates.Add(1)
			return &pair, nil
		}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := sinktest.UniqueName(t)
			s := newSink(t, c.brokers, name, func(cfg *kafkasink.Config) {
				cfg.TLS, cfg.SASL = c.tls, c.sasl
				cfg.Topics.Prefix = name
			})
			a := sinktest.Inserts("public", "orders", 100, 1, 20)
			b := sinktest.Inserts("public", "orders", 200, 21, 20)
			write(t, s, a)
			write(t, s, b)
			if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
				t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
			}
			// The same broker, over its PLAINTEXT listener.
			recs := sinktest.ReadCommitted(t, plaintext, name+".public.orders")
			sinktest.CheckExactlyOnce(t, recs, append(a, b...))
			if c.sasl != nil && c.sasl.Mechanism == kafkasink.SASLOAuthBearer && tokens.Load() == 0 {
				t.Fatal("the Token function was never called")
			}
			if c.tls.GetClientCertificate != nil && certificates.Load() == 0 {
				t.Fatal("the GetClientCertificate function was never called")
			}
		})
	}
}

// throwawayCA returns a new CA and a client certificate it signed, as PEM.
func throwawayCA(t *testing.T) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafkasink-untrusted-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kafkasink-untrusted-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
}

func TestSecurityFailuresAreFatalAndSayWhich(t *testing.T) {
	env := loadSecurityEnv(t)
	saslSSL, mtls := env.saslSSL, env.mtls
	user, pass, caFile := env.user, env.pass, env.caFile
	otherCA, otherCert, otherKey := throwawayCA(t)
	const wrongPassword = "wrong-password-7f3a9c"
	scram := &kafkasink.SASL{Mechanism: kafkasink.SASLScramSHA256, Username: user, Password: pass}

	cases := []struct {
		name    string
		brokers []string
		tls     *kafkasink.TLS
		sasl    *kafkasink.SASL
		want    []string // each must appear in the error
	}{
		{"wrong-password-SCRAM-SHA-512", saslSSL, &kafkasink.TLS{CAFile: caFile},
			&kafkasink.SASL{Mechanism: kafkasink.SASLScramSHA512, Username: user, Password: wrongPassword},
			[]string{"refused SASL SCRAM-SHA-512 authentication", fmt.Sprintf("user %q", user), "Config.SASL", "SASL Authentication failed"}},
		{"wrong-password-PLAIN", saslSSL, &kafkasink.TLS{CAFile: caFile},
			&kafkasink.SASL{Mechanism: kafkasink.SASLPlain, Username: user, Password: wrongPassword},
			[]string{"refused SASL PLAIN authentication", fmt.Sprintf("user %q", user), "Config.SASL"}},
		{"expired-OAUTHBEARER-token", saslSSL, &kafkasink.TLS{CAFile: caFile},
			&kafkasink.SASL{Mechanism: kafkasink.SASLOAuthBearer, Token: func(context.Context) (string, error) {
				return unsecuredJWT("kafkasink", time.Now().Add(-2*time.Hour), time.Hour), nil
			}},
			[]string{"refused SASL OAUTHBEARER authentication: check the token Config.SASL.Token returns", "invalid_token"}},
		{"untrusted-broker-cert-system-roots", saslSSL, &kafkasink.TLS{}, scram,
			[]string{"certificate is not trusted", "Config.TLS.CAFile"}},
		{"untrusted-broker-cert-other-CA", mtls, &kafkasink.TLS{CAPEM: otherCA, CertFile: env.certFile, KeyFile: env.keyFile}, nil,
			[]string{"certificate is not trusted", "Config.TLS.CAFile"}},
		{"broker-cert-does-not-name-ServerName", saslSSL, &kafkasink.TLS{CAFile: caFile, ServerName: "not-in-the-cert.example"}, scram,
			[]string{"does not name the host", "Config.TLS.ServerName"}},
		{"client-cert-from-other-CA", mtls, &kafkasink.TLS{CAFile: caFile, CertPEM: otherCert, KeyPEM: otherKey}, nil,
			[]string{"refused the client certificate", "Config.TLS.CertFile"}},
		{"no-client-cert", mtls, &kafkasink.TLS{CAFile: caFile}, nil,
			[]string{"refused the connection without a client certificate", "Config.TLS.CertFile"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := kafkasink.Config{Brokers: c.brokers, SinkID: sinktest.UniqueName(t), TLS: c.tls, SASL: c.sasl}
			cfg.Topics.Prefix = cfg.SinkID
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			s, err := kafkasink.New(ctx, cfg)
			took := time.Since(start)
			if err == nil {
				s.Close(context.Background())
				t.Fatalf("New succeeded after %v, want an error", took)
			}
			t.Logf("New failed after %v: %v", took.Round(time.Millisecond), err)
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				t.Errorf("New ran into its deadline (%v) instead of failing on the cause", took)
			}
			if took > 10*time.Second {
				t.Errorf("New took %v to fail; want it to fail fast, well before its 30s deadline", took)
			}
			if !kafkasink.IsFatal(err) {
				t.Errorf("IsFatal = false, want true")
			}
			if kafkasink.IsRetryable(err) {
				t.Errorf("IsRetryable = true, want false")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q", w)
				}
			}
			for _, secret := range []string{wrongPassword, string(pass)} {
				if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v %#v", err, err), secret) {
					t.Errorf("error shows a password")
				}
			}
		})
	}
}

func TestPlainWithoutTLSRefused(t *testing.T) {
	_, brokers := sinktest.Cluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "sink", "sink-password"))
	sasl := &kafkasink.SASL{Mechanism: kafkasink.SASLPlain, Username: "sink", Password: "sink-password"}

	_, err := startSink(t, brokers, "plain-no-tls", func(c *kafkasink.Config) { c.SASL = sasl })
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New: %v, want a *ConfigError", err)
	}
	if len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], "AllowPlaintext") || !strings.Contains(ce.Problems[0], "PLAIN") {
		t.Fatalf("problems %q, want one naming SASL PLAIN and AllowPlaintext", ce.Problems)
	}
	if !kafkasink.IsFatal(err) {
		t.Error("IsFatal = false, want true")
	}

	// Allowed: validation passes and the sink authenticates in clear text.
	allowed := *sasl
	allowed.AllowPlaintext = true
	s := newSink(t, brokers, "plain-allowed", func(c *kafkasink.Config) { c.SASL = &allowed })
	write(t, s, sinktest.Inserts("public", "orders", 100, 1, 3))

	// SCRAM needs no TLS: the password never crosses the wire.
	for _, m := range []kafkasink.SASLMechanism{kafkasink.SASLScramSHA256, kafkasink.SASLScramSHA512} {
		_, err := startSink(t, []string{"127.0.0.1:1"}, "scram-no-tls", func(c *kafkasink.Config) {
			c.SASL = &kafkasink.SASL{Mechanism: m, Username: "u", Password: "p"}
		})
		if errors.As(err, &ce) {
			t.Errorf("%s without TLS: %v, want no config error", m, err)
		}
	}
}

// logged renders v through fmt, slog's JSON and text handlers, and JSON.
func logged(t *testing.T, v any) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%o", "%10.4s", "%U"} {
		out["fmt "+verb] = fmt.Sprintf(verb, v)
	}
	var jb, tb bytes.Buffer
	slog.New(slog.NewJSONHandler(&jb, nil)).Info("msg", "v", v)
	slog.New(slog.NewTextHandler(&tb, nil)).Info("msg", "v", v)
	out["slog JSON"], out["slog text"] = jb.String(), tb.String()
	b, err := json.Marshal(v)
	out["json.Marshal"] = string(b) + fmt.Sprint(err)
	return out
}

func TestSecretsNeverPrinted(t *testing.T) {
	const (
		password     = "sasl-password-0d1e2f"
		secretKey    = "aws-secret-key-9a8b7c"
		sessionToken = "aws-session-token-6d5e4f"
	)
	secrets := []string{password, secretKey, sessionToken,
		// %x and %q would show these forms.
		fmt.Sprintf("%x", password), fmt.Sprintf("%x", secretKey), fmt.Sprintf("%x", sessionToken)}
	creds := kafkasink.AWSCredentials{AccessKey: "AKIAEXAMPLE", SecretKey: secretKey, SessionToken: sessionToken}
	plain := &kafkasink.SASL{Mechanism: kafkasink.SASLScramSHA512, Username: "sink", Password: password}
	aws := &kafkasink.SASL{Mechanism: kafkasink.SASLAWSMSKIAM,
		AWS: func(context.Context) (kafkasink.AWSCredentials, error) { return creds, nil }}
	cfg := kafkasink.Config{Brokers: []string{"b:9092"}, SinkID: "s", SASL: plain, TLS: &kafkasink.TLS{ServerName: "b"}}
	cfgAWS := cfg
	cfgAWS.SASL = aws

	values := map[string]any{
		"Config": cfg, "*Config": &cfg, "Config(AWS)": cfgAWS,
		"SASL": *plain, "*SASL": plain, "SASL(AWS)": *aws,
		"AWSCredentials": creds, "*AWSCredentials": &creds,
		"Secret": kafkasink.Secret(password), "*Secret": &plain.Password,
		"[]Secret":          []kafkasink.Secret{creds.SecretKey, creds.SessionToken},
		"map[string]Secret": map[string]kafkasink.Secret{"password": plain.Password},
	}
	for name, v := range values {
		for how, s := range logged(t, v) {
			for _, secret := range secrets {
				if strings.Contains(s, secret) {
					t.Errorf("%s of %s shows a secret: %s", how, name, s)
				}
			}
		}
	}
	// Where JSON works it shows the placeholder, not nothing.
	b, err := json.Marshal(creds)
	if err != nil || !strings.Contains(string(b), `"SecretKey":"[redacted]"`) {
		t.Errorf("json.Marshal(AWSCredentials) = %s, %v; want SecretKey [redacted]", b, err)
	}
	if _, err := json.Marshal(*plain); err != nil {
		t.Logf("json.Marshal(SASL) fails as a whole: %v", err)
	}

	// The error of a refused login does not carry the password either.
	// (Against the real broker, TestSecurityFailuresAreFatalAndSayWhich
	// checks the same with the broker's SASL_AUTHENTICATION_FAILED; the
	// fake cluster instead closes the connection, so New fails on EOF.)
	_, brokers := sinktest.Cluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "sink", "the-right-one"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wrong := cfg
	wrong.Brokers, wrong.TLS = brokers, nil
	s, err := kafkasink.New(ctx, wrong)
	if err == nil {
		s.Close(context.Background())
		t.Fatal("New with a wrong password succeeded")
	}
	t.Logf("New: %v", err)
	for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		if strings.Contains(s, password) {
			t.Errorf("New's error shows the password: %s", s)
		}
	}
}
