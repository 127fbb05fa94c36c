package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// envSchemaRegistry is the variable of the real environment that names
// a Confluent-compatible Schema Registry API, as
// eval "$(scripts/testenv.sh env)" sets it; the tests that need one skip
// without it.
const envSchemaRegistry = "KAFKASINK_TEST_SCHEMA_REGISTRY"

// testCA is a throwaway certificate authority for a test's TLS endpoints
// and clients.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafkasink test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key signed by ca, in PEM: a server's
// for 127.0.0.1, or a client's named cn.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// registryProxy is a loopback TLS reverse proxy in front of the real
// Schema Registry that requires a client certificate of its CA and a
// bearer token, as a registry behind an authenticating gateway does.
type registryProxy struct {
	url string // the registry's API through the proxy

	mu     sync.Mutex
	token  string   // the bearer token it accepts
	seen   []string // "<client certificate's name> <token>" of each request it passed on
	denied int      // requests refused for their token
}

func newRegistryProxy(t *testing.T, ca *testCA, registry, token string) *registryProxy {
	t.Helper()
	target, err := url.Parse(registry)
	if err != nil {
		t.Fatal(err)
	}
	p := &registryProxy{token: token}
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		want := "Bearer " + p.token
		ok := r.Header.Get("Authorization") == want
		if ok {
			p.seen = append(p.seen, r.TLS.PeerCertificates[0].Subject.CommonName+" "+strings.TrimPrefix(want, "Bearer "))
		} else {
			p.denied++
		}
		p.mu.Unlock()
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error_code":40101,"message":"a valid bearer token is required"}`)
			return
		}
		r.Header.Del("Authorization")
		forward.ServeHTTP(w, r)
	}))
	certPEM, keyPEM := ca.issue(t, "registry", true)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.url = srv.URL + target.Path
	return p
}

func (p *registryProxy) setToken(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.token = token
}

func (p *registryProxy) requests() (seen []string, denied int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...), p.denied
}

// TestSchemaRegistryTLSAndBearer runs the program's registry client
// through a loopback TLS proxy in front of the real Schema Registry that
// requires a client certificate and a bearer token: with
// -schema-registry-tls-ca, -schema-registry-tls-cert,
// -schema-registry-tls-key and -schema-registry-token-file the encoder
// registers its schemas in the real registry, over TLS, with the token;
// the token file is read for every request, so a rotated token is used
// from the next one on; a wrong token is a fatal refusal naming the
// credentials and the flags; without the client certificate, or without
// the CA, the handshake fails and nothing reaches the registry.
func TestSchemaRegistryTLSAndBearer(t *testing.T) {
	registry := kafkasinktest.Env(t, envSchemaRegistry)[0]
	ca := newTestCA(t)
	proxy := newRegistryProxy(t, ca, registry, "first-token")
	clientCert, clientKey := ca.issue(t, "kafkasink-client", false)
	caFile, certFile, keyFile := writeFile(t, "ca.pem", string(ca.certPEM)), writeFile(t, "client.pem", string(clientCert)), writeFile(t, "client.key", string(clientKey))
	tokenFile := writeFile(t, "token", "first-token\n")

	name := strings.NewReplacer("-", "_").Replace(kafkasinktest.UniqueName(t))
	topic := name + ".public.t"
	direct, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range []string{topic + "-value", topic + "-key"} {
			direct.DeleteSubject(context.Background(), s, sr.SoftDelete)
			direct.DeleteSubject(context.Background(), s, sr.HardDelete)
		}
	})
	// version returns an insert of a new version of the table, with
	// columns more than the last: each needs a registration.
	columns := []kafkasink.ColumnInfo{{Name: "id", Type: &kafkasink.TypeInfo{Name: "int4", Modifier: -1}, NotNull: true}}
	version := func(extra string) kafkasink.Event {
		if extra != "" {
			columns = append(columns, kafkasink.ColumnInfo{Name: extra, Type: &kafkasink.TypeInfo{Name: "text", Modifier: -1}})
		}
		return kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "t", Position: kafkasink.Position{LSN: 1},
			Key: []string{"id"}, After: kafkasink.Row{{Name: "id", Value: int32(1)}},
			Relation: &kafkasink.Relation{Columns: append([]kafkasink.ColumnInfo(nil), columns...)}}
	}
	encoder := func(t *testing.T, flags ...string) *kafkasinkavro.Encoder {
		t.Helper()
		o, err := parse(append([]string{"-pg", "postgres://localhost/db", "-brokers", "localhost:9092", "-encoder", "avro", "-schema-registry", proxy.url}, flags...), noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		kcfg, _, err := o.configs(nil)
		if err != nil {
			t.Fatal(err)
		}
		return kcfg.Encoder.(*kafkasinkavro.Encoder)
	}
	prepare := func(enc *kafkasinkavro.Encoder, e kafkasink.Event) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return enc.Prepare(ctx, []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: topic, KeyColumns: e.Key}})
	}
	all := []string{"-schema-registry-tls-ca", caFile, "-schema-registry-tls-cert", certFile, "-schema-registry-tls-key", keyFile, "-schema-registry-token-file", tokenFile}

	enc := encoder(t, all...)
	if err := prepare(enc, version("")); err != nil {
		t.Fatalf("through TLS with the token: %v", err)
	}
	seen, denied := proxy.requests()
	if len(seen) == 0 || denied != 0 || seen[0] != "kafkasink-client first-token" {
		t.Fatalf("the proxy passed on %q and refused %d requests; want requests with the client certificate and the token", seen, denied)
	}

	// Rotated: the next request reads the file again.
	proxy.setToken("second-token")
	if err := os.WriteFile(tokenFile, []byte("second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepare(enc, version("a")); err != nil {
		t.Fatalf("after the token rotated: %v", err)
	}
	if seen, _ = proxy.requests(); seen[len(seen)-1] != "kafkasink-client second-token" {
		t.Errorf("after the rotation the proxy saw %q, want the new token", seen[len(seen)-1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	versions, err := direct.Schemas(ctx, topic+"-value")
	if err != nil || len(versions) != 2 {
		t.Fatalf("the real registry has %d versions of %s-value (%v), want the 2 registered through the proxy", len(versions), topic, err)
	}

	t.Run("wrong token", func(t *testing.T) {
		if err := os.WriteFile(tokenFile, []byte("stale-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := prepare(encoder(t, all...), version("b"))
		if !kafkasink.IsFatal(err) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "-schema-registry-token-file") {
			t.Errorf("with a token the proxy refuses: %v; want a fatal error naming the credentials' flags", err)
		}
	})
	for _, tc := range []struct {
		name, column string
		want         []string // the error says one of these
		flags        []string
	}{
		// Under TLS 1.3 the client's handshake ends before the server
		// checks its certificate: the server's alert (certificate
		// required) can reach the client after its request's write
		// failed on the connection the server closed.
		{"no client certificate", "c", []string{"certificate required", "broken pipe", "connection reset by peer"},
			[]string{"-schema-registry-tls-ca", caFile, "-schema-registry-token-file", tokenFile}},
		{"no CA", "d", []string{"certificate signed by unknown authority"},
			[]string{"-schema-registry-tls-cert", certFile, "-schema-registry-tls-key", keyFile, "-schema-registry-token-file", tokenFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seenBefore, deniedBefore := proxy.requests()
			err := prepare(encoder(t, tc.flags...), version(tc.column))
			var pe *kafkasink.PrepareError
			if !errors.As(err, &pe) || !slices.ContainsFunc(tc.want, func(w string) bool { return strings.Contains(err.Error(), w) }) {
				t.Errorf("Prepare: %v; want a PrepareError saying one of %q", err, tc.want)
			}
			if seen, denied := proxy.requests(); len(seen) != len(seenBefore) || denied != deniedBefore {
				t.Errorf("a request reached the proxy's handler without the TLS handshake")
			}
		})
	}
}

// TestSchemaRegistrySubjectsKeys: the configuration file's
// schema_registry_subjects and schema_registry_namespace give the encoder
// RecordNameStrategy: two tables of different shapes routed to one topic
// have their schemas registered in the real registry under subjects of
// their own, <namespace>.public.<table>.Envelope and .Key, one version
// each (under the default TopicNameStrategy the second would be refused
// as a BACKWARD-incompatible version of the topic's subject).
func TestSchemaRegistrySubjectsKeys(t *testing.T) {
	registry := kafkasinktest.Env(t, envSchemaRegistry)[0]
	name := strings.NewReplacer("-", "_").Replace(kafkasinktest.UniqueName(t))
	config := writeFile(t, "kafkasink.yaml", "encoder: avro\nschema_registry: "+registry+
		"\nschema_registry_subjects: RecordNameStrategy\nschema_registry_namespace: "+name+"\n")
	o, err := parse([]string{"-pg", "postgres://localhost/db", "-brokers", "localhost:9092", "-config", config}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	kcfg, _, err := o.configs(nil)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, table := range []string{"a", "b"} {
		for _, record := range []string{".Envelope", ".Key"} {
			subjects = append(subjects, name+".public."+table+record)
		}
	}
	t.Cleanup(func() {
		for _, s := range subjects {
			direct.DeleteSubject(context.Background(), s, sr.SoftDelete)
			direct.DeleteSubject(context.Background(), s, sr.HardDelete)
		}
	})
	event := func(table, typ string) kafkasink.Event {
		return kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: table, Position: kafkasink.Position{LSN: 1},
			Key: []string{"id"}, Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{{Name: "id", Type: &kafkasink.TypeInfo{Name: typ, Modifier: -1}, NotNull: true}}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := []kafkasink.Event{event("a", "int4"), event("b", "text")}
	route := kafkasink.EventRoute{Topic: name + ".shared", KeyColumns: []string{"id"}}
	if err := kcfg.Encoder.(*kafkasinkavro.Encoder).Prepare(ctx, events, []kafkasink.EventRoute{route, route}); err != nil {
		t.Fatal(err)
	}
	for _, s := range subjects {
		if versions, err := direct.Schemas(ctx, s); err != nil || len(versions) != 1 {
			t.Errorf("subject %s: %d versions (%v), want 1", s, len(versions), err)
		}
	}
}
