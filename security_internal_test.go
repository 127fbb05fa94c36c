package kafkasink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kafkasink/kafkasink/internal/tlsconf"
)

// clientMechanisms builds a client from the config's security options, as
// the sink does, and returns the SASL mechanisms it was given.
func clientMechanisms(t *testing.T, c *Config) []sasl.Mechanism {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, c.securityOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []sasl.Mechanism
	for _, v := range cl.OptValues(kgo.SASL) {
		ms, ok := v.([]sasl.Mechanism)
		if !ok {
			t.Fatalf("OptValues(kgo.SASL) holds a %T", v)
		}
		out = append(out, ms...)
	}
	return out
}

// MSK IAM is not run against a broker here: that needs AWS.
func TestAWSMSKIAMMechanism(t *testing.T) {
	creds := AWSCredentials{AccessKey: "AKIAEXAMPLEKEY", SecretKey: "aws-secret-5e6f", SessionToken: "aws-session-7a8b"}
	calls := 0
	c := Config{Brokers: []string{"b-1.msk.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"}, SinkID: "iam",
		TLS: &TLS{},
		SASL: &SASL{Mechanism: SASLAWSMSKIAM, AWS: func(context.Context) (AWSCredentials, error) {
			calls++
			return creds, nil
		}}}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	ms := clientMechanisms(t, &c)
	if len(ms) != 1 || ms[0].Name() != "AWS_MSK_IAM" {
		t.Fatalf("client SASL mechanisms %v, want one named AWS_MSK_IAM", ms)
	}

	// The first message is the signed request MSK checks: it names the
	// access key and carries the session token, never the secret key.
	_, msg, err := ms[0].Authenticate(context.Background(), c.Brokers[0])
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if calls != 1 {
		t.Errorf("the AWS function was called %d times, want once per connection", calls)
	}
	var payload map[string]string
	if err := json.Unmarshal(msg, &payload); err != nil {
		t.Fatalf("first message %q: %v", msg, err)
	}
	for k, want := range map[string]string{
		"action": "kafka-cluster:Connect", "host": "b-1.msk.abc123.c2.kafka.eu-west-1.amazonaws.com",
		"x-amz-security-token": string(creds.SessionToken), "version": "2020_10_22",
	} {
		if payload[k] != want {
			t.Errorf("payload[%q] = %q, want %q", k, payload[k], want)
		}
	}
	if !strings.HasPrefix(payload["x-amz-credential"], creds.AccessKey+"/") || !strings.Contains(payload["x-amz-credential"], "/eu-west-1/kafka-cluster/") {
		t.Errorf("x-amz-credential %q, want the access key and region eu-west-1", payload["x-amz-credential"])
	}
	if payload["x-amz-signature"] == "" {
		t.Error("no x-amz-signature")
	}
	if strings.Contains(string(msg), string(creds.SecretKey)) {
		t.Error("the first message carries the secret key")
	}

	// A failing credentials function fails the connection with its error.
	boom := errors.New("no credentials")
	c.SASL.AWS = func(context.Context) (AWSCredentials, error) { return AWSCredentials{}, boom }
	if _, _, err := c.SASL.settings().SASL().Authenticate(context.Background(), c.Brokers[0]); !errors.Is(err, boom) {
		t.Errorf("Authenticate with failing credentials: %v, want %v", err, boom)
	}

	// Without a credentials function the config is refused.
	bad := Config{Brokers: []string{"b:1"}, SinkID: "iam", SASL: &SASL{Mechanism: SASLAWSMSKIAM}}
	bad = bad.withDefaults()
	if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "AWS_MSK_IAM needs an AWS credentials function") {
		t.Errorf("validate without AWS: %v", err)
	}
}

// The OAUTHBEARER mechanism sends the Token function's token as an RFC 7628
// client-first message; TestSecurityCombinations runs it against Kafka.
func TestSecurityOAuthBearerMechanism(t *testing.T) {
	c := Config{Brokers: []string{"b:1"}, SinkID: "oauth", TLS: &TLS{},
		SASL: &SASL{Mechanism: SASLOAuthBearer, Token: func(context.Context) (string, error) { return "tok.en.", nil }}}
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	ms := clientMechanisms(t, &c)
	if len(ms) != 1 || ms[0].Name() != "OAUTHBEARER" {
		t.Fatalf("client SASL mechanisms %v, want one named OAUTHBEARER", ms)
	}
	_, msg, err := ms[0].Authenticate(context.Background(), "b:1")
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if want := "n,,\x01auth=Bearer tok.en.\x01\x01"; string(msg) != want {
		t.Errorf("first message %q, want %q", msg, want)
	}
}

// testCert returns a certificate for 127.0.0.1 signed by a new CA, with the
// CA's PEM and the CA itself for signing more.
func testCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage) (tls.Certificate, *x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if ca == nil { // self-signed CA
		tmpl.IsCA, tmpl.BasicConstraintsValid, ca, caKey = true, true, tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, cert, key
}

// A broker that refuses the client certificate ends the handshake with a
// TLS alert, which crypto/tls reports as a *net.OpError "remote error", not
// as tls.AlertError. explainConnectErr must still name the client
// certificate, and the result must be fatal. TestSecurityFailuresAreFatalAndSayWhich
// checks the same against Kafka.
func TestSecurityRemoteTLSAlertIsFatal(t *testing.T) {
	_, ca, caKey := testCert(t, nil, nil, "test-ca", x509.ExtKeyUsageServerAuth)
	server, _, _ := testCert(t, ca, caKey, "server", x509.ExtKeyUsageServerAuth)
	_, otherCA, otherKey := testCert(t, nil, nil, "other-ca", x509.ExtKeyUsageClientAuth)
	stranger, _, _ := testCert(t, otherCA, otherKey, "stranger", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	connErr := func(certs []tls.Certificate) error {
		cfg := &tls.Config{RootCAs: pool}
		if certs != nil {
			// Send it even though the server's CA list does not name
			// its issuer: Go would otherwise send none.
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Read(make([]byte, 1)) // TLS 1.3: the server's verdict comes after the client's handshake
		return err
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		tls   *TLS
		want  string
		alert tls.AlertError
	}{
		{"untrusted client certificate", []tls.Certificate{stranger}, &TLS{CertFile: "client.pem", KeyFile: "client.key"},
			"refused the client certificate (tls: unknown certificate authority): check Config.TLS.CertFile", 48},
		{"no client certificate", nil, &TLS{},
			"refused the connection without a client certificate (tls: certificate required): it requires one: set Config.TLS.CertFile", 116},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := connErr(tc.certs)
			if a, ok := tlsconf.Alert(raw); !ok || a != tc.alert {
				t.Fatalf("tlsconf.Alert(%v) = %d, %t; want %d", raw, a, ok, tc.alert)
			}
			// Met during a Write, unexplained, it is fatal too.
			if wrapped := fmt.Errorf("writing: %w", raw); !IsFatal(wrapped) || IsRetryable(wrapped) {
				t.Errorf("raw alert: IsFatal %t, IsRetryable %t; want fatal", IsFatal(wrapped), IsRetryable(wrapped))
			}
			c := Config{TLS: tc.tls}
			err := c.explainConnectErr(fmt.Errorf("reading metadata: %w", raw))
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("explained: %v\nwant it to contain %q", err, tc.want)
			}
			if !IsFatal(err) || IsRetryable(err) {
				t.Errorf("IsFatal %t, IsRetryable %t; want fatal", IsFatal(err), IsRetryable(err))
			}
			var op *net.OpError
			if !errors.As(err, &op) {
				t.Error("the explained error does not unwrap to the original *net.OpError")
			}
		})
	}
	// Errors that are not alerts are left alone.
	if _, ok := tlsconf.Alert(&net.OpError{Op: "read", Err: errors.New("x")}); ok {
		t.Error("tlsconf.Alert took a read error for an alert")
	}
}

// TLS values never print the client's private key, and SASL encodes to
// JSON without its functions.
func TestTLSKeyHiddenSASLEncodable(t *testing.T) {
	tc := TLS{CertPEM: []byte("cert"), KeyPEM: []byte("-----BEGIN PRIVATE KEY----- secret")}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{tc, &tc} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, "secret") {
				t.Errorf("%s of %T printed the key: %s", verb, v, out)
			}
		}
	}
	b, err := json.Marshal(SASL{Mechanism: SASLOAuthBearer, Token: func(context.Context) (string, error) { return "", nil }})
	if err != nil || strings.Contains(string(b), "Token") {
		t.Errorf("SASL JSON %s, %v: want it encodable without its functions", b, err)
	}
}

// Client certificate files are read again for a new connection once they
// changed on disk, as rotation tools replace them; a pair that does not
// load fails that handshake, naming the files, and the next good pair is
// used again.
func TestTLSClientCertificateFilesReloaded(t *testing.T) {
	_, ca, caKey := testCert(t, nil, nil, "test-ca", x509.ExtKeyUsageServerAuth)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	modified := time.Now()
	install := func(certPEM, keyPEM []byte) {
		t.Helper()
		modified = modified.Add(time.Second) // a new mtime, whatever the file system's granularity
		for name, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
			if err := os.WriteFile(name, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(name, modified, modified); err != nil {
				t.Fatal(err)
			}
		}
	}
	issue := func(cn string) (certPEM, keyPEM []byte) {
		c, _, key := testCert(t, ca, caKey, cn, x509.ExtKeyUsageClientAuth)
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	presented := func(cfg *tls.Config) (string, error) {
		pair, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			return "", err
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName, nil
	}

	firstCert, firstKey := issue("first")
	install(firstCert, firstKey)
	cfg, err := (&TLS{CertFile: certFile, KeyFile: keyFile}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cn, err := presented(cfg); cn != "first" || err != nil {
		t.Fatalf("presented %q, %v; want the first certificate", cn, err)
	}
	install(issue("rotated"))
	if cn, err := presented(cfg); cn != "rotated" || err != nil {
		t.Fatalf("presented %q, %v after rotation; want the rotated certificate", cn, err)
	}
	install(firstCert, []byte("not a key"))
	if _, err := presented(cfg); err == nil || !strings.Contains(err.Error(), certFile) {
		t.Fatalf("a broken pair on disk: %v, want an error naming %s", err, certFile)
	}
	install(firstCert, firstKey)
	if cn, err := presented(cfg); cn != "first" || err != nil {
		t.Fatalf("presented %q, %v after the pair was fixed; want the first certificate", cn, err)
	}
}

// Two sources of one client certificate are refused, naming both.
func TestTLSClientCertificateSourcesExclusive(t *testing.T) {
	get := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return nil, nil }
	for _, tc := range []struct {
		tls  TLS
		want string
	}{
		{TLS{CertPEM: []byte("c"), KeyPEM: []byte("k"), GetClientCertificate: get}, "TLS.GetClientCertificate and a client certificate (CertFile/KeyFile or CertPEM/KeyPEM) are both set"},
		{TLS{CertFile: "c", KeyFile: "k", CertPEM: []byte("c"), KeyPEM: []byte("k")}, "TLS has both CertFile/KeyFile and CertPEM/KeyPEM"},
	} {
		c := Config{TLS: &tc.tls}
		if p := strings.Join(c.securityProblems(), "; "); !strings.Contains(p, tc.want) {
			t.Errorf("problems %q, want %q", p, tc.want)
		}
	}
}
