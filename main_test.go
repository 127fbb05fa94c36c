package kafkasink_test

import (
	"os"
	"testing"

	"github.com/kafkasink/kafkasink/internal/dockertest"
)

// TestMain starts Kafka and PostgreSQL containers when a Docker engine is
// available and scripts/testenv.sh has not set the environment; otherwise
// the integration tests skip and say what to set.
func TestMain(m *testing.M) {
	stop := dockertest.Setup()
	code := m.Run()
	stop()
	os.Exit(code)
}
