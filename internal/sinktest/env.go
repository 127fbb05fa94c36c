package sinktest

import (
	"os"
	"testing"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// The test environment's variables, set by
// eval "$(scripts/testenv.sh env)". The root module's tests read them only
// through Env, RealBrokers, RealPG and Has, so that every skip names what
// is missing and how to get it; the nested modules' tests name the few
// they need themselves and read them with kafkasinktest.Env.
const (
	EnvPG            = "KAFKASINK_TEST_PG"               // postgres:// URL, wal_level=logical, a REPLICATION role
	EnvBrokers       = "KAFKASINK_TEST_BROKERS"          // the single-node broker, plaintext
	EnvBrokers3      = "KAFKASINK_TEST_BROKERS3"         // the 3-broker cluster (testenv.sh up --brokers 3)
	EnvSASLSSL       = "KAFKASINK_TEST_SASL_SSL_BROKERS" // the single node's SASL_SSL listener
	EnvMTLS          = "KAFKASINK_TEST_MTLS_BROKERS"     // the single node's mutual-TLS listener
	EnvSASLUser      = "KAFKASINK_TEST_SASL_USER"
	EnvSASLPassword  = "KAFKASINK_TEST_SASL_PASSWORD"
	EnvCA            = "KAFKASINK_TEST_CA"
	EnvClientCert    = "KAFKASINK_TEST_CLIENT_CERT"
	EnvClientKey     = "KAFKASINK_TEST_CLIENT_KEY"
	EnvTestenv       = "KAFKASINK_TEST_TESTENV" // scripts/testenv.sh, to kill and restart brokers
	EnvDir           = "KAFKASINK_TEST_DIR"     // the environment's runtime directory (logs)
	EnvKcat          = "KAFKASINK_TEST_KCAT"
	EnvKafkaCP       = "KAFKASINK_TEST_KAFKA_CLASSPATH"
	EnvKafkaToolsLog = "KAFKASINK_TEST_KAFKA_TOOLS_LOG4J"
)

// Env is kafkasinktest.Env, which the nested modules' tests call too.
func Env(t testing.TB, names ...string) []string {
	t.Helper()
	return kafkasinktest.Env(t, names...)
}

// RealBrokers is kafkasinktest.RealBrokers: the broker list in the
// variable name (EnvBrokers, EnvBrokers3, …), or skips t.
func RealBrokers(t testing.TB, name string) []string {
	t.Helper()
	return kafkasinktest.RealBrokers(t, name)
}

// RealPG returns the PostgreSQL URL of the test environment, or skips t.
func RealPG(t testing.TB) string {
	t.Helper()
	return Env(t, EnvPG)[0]
}

// Has reports whether the variable is set, for tests that do more against
// the real environment when it is there (external readers) instead of
// skipping without it.
func Has(name string) bool { return optional(name) != "" }

// optional returns the variable's value, "" when it is unset, for what has
// a fallback of its own (a kcat on the PATH).
func optional(name string) string { return os.Getenv(name) }
