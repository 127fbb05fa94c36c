package kafkasinktest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Env returns the values of the environment variables names, in order,
// or skips t naming every one that is unset: a test against real
// services (a Kafka cluster, PostgreSQL, a Schema Registry) runs where
// they are given and says what it needs where they are not.
func Env(t testing.TB, names ...string) []string {
	t.Helper()
	vals := make([]string, len(names))
	var missing []string
	for i, n := range names {
		if vals[i] = os.Getenv(n); vals[i] == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s not set: this test needs the real services they name; set them to run it "+
			"(in the kafkasink repository, scripts/testenv.sh up starts them and eval \"$(scripts/testenv.sh env)\" sets them; see docs/integration-tests.md)",
			strings.Join(missing, ", "))
	}
	return vals
}

// RealBrokers returns the brokers listed, separated by commas, in the
// environment variable name, for Config.Brokers, or skips t as Env does.
func RealBrokers(t testing.TB, name string) []string {
	t.Helper()
	return strings.Split(Env(t, name)[0], ",")
}

// UniqueName returns a name for the topics, sink id and checkpoint topic
// of one test that collides neither with another test's nor with an
// earlier run's against the same long-lived broker: the clock, then the
// test's name, lower case, with "/" and "_" made "-". It is a valid
// topic name for test names of letters, digits, "-", "_" and "/".
func UniqueName(t testing.TB) string {
	return fmt.Sprintf("t%d-%s", time.Now().UnixNano()%1e9, strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name())))
}

// DeleteTopics deletes every topic whose name starts with prefix (a
// UniqueName, say), so that a long-lived shared broker does not pile up
// the topics of passed tests. It returns the first error listing or
// deleting them.
func DeleteTopics(ctx context.Context, brokers []string, prefix string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	var mine []string
	for _, topic := range all.Names() {
		if strings.HasPrefix(topic, prefix) {
			mine = append(mine, topic)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	resp, err := adm.DeleteTopics(ctx, mine...)
	if err != nil {
		return err
	}
	return resp.Error()
}
