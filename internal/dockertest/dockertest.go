// Command dockertest runs the project's tests against Apache Kafka and
// PostgreSQL in containers, for developers who have a Docker engine but
// have not started scripts/testenv.sh:
//
//	cd internal/dockertest && go run . ./...
//
// It starts what the environment lacks with testcontainers-go, sets
// KAFKASINK_TEST_BROKERS and KAFKASINK_TEST_PG, runs `go test` with its
// arguments in the repository's root, and stops the containers. Tests that
// need what only scripts/testenv.sh provides (TLS and SASL listeners, a
// three-broker cluster, broker kills, kcat and the Java console consumer)
// still skip, naming what is missing. Without an engine it says so and
// runs the tests anyway: the integration tests skip.
//
// It is a module of its own so that testcontainers-go, and the Docker,
// gRPC and OpenTelemetry modules it pulls in, never enter the module graph
// of the library or of its users (TestUserModuleGraph checks that).
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/kafka"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
)

// Images started when the environment variables are unset.
const (
	KafkaImage    = "confluentinc/confluent-local:7.5.0"
	PostgresImage = "postgres:15"
)

func main() {
	stop := setup()
	args := append([]string{"test"}, os.Args[1:]...)
	if len(os.Args) == 1 {
		args = append(args, "./...")
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..") // the repository's root
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockertest: go %v: %v\n", args, err)
		os.Exit(1)
	}
}

// setup starts what the environment lacks and returns a function that
// stops it. Without a Docker engine it does nothing but say so.
func setup() (stop func()) {
	wantKafka := os.Getenv("KAFKASINK_TEST_BROKERS") == ""
	wantPG := os.Getenv("KAFKASINK_TEST_PG") == ""
	if !wantKafka && !wantPG {
		return func() {}
	}
	if !engineAnswers() {
		fmt.Fprintln(os.Stderr, "dockertest: no Docker engine answers; the integration tests will skip (scripts/testenv.sh starts Kafka and PostgreSQL without Docker)")
		return func() {}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if wantKafka {
		c, err := kafka.Run(ctx, KafkaImage)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dockertest: starting Kafka (%s): %v; integration tests will skip\n", KafkaImage, err)
		} else {
			stops = append(stops, func() { testcontainers.TerminateContainer(c) })
			if brokers, err := c.Brokers(ctx); err == nil && len(brokers) > 0 {
				os.Setenv("KAFKASINK_TEST_BROKERS", brokers[0])
			}
		}
	}
	if wantPG {
		c, err := postgres.Run(ctx, PostgresImage,
			postgres.WithDatabase("kafkasink"),
			postgres.WithUsername("kafkasink"),
			postgres.WithPassword("kafkasink"),
			testcontainers.WithCmd("postgres", "-c", "wal_level=logical", "-c", "max_replication_slots=20", "-c", "max_wal_senders=20"),
			postgres.BasicWaitStrategies(),
		)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dockertest: starting PostgreSQL (%s): %v; integration tests will skip\n", PostgresImage, err)
		} else {
			stops = append(stops, func() { testcontainers.TerminateContainer(c) })
			if dsn, err := c.ConnectionString(ctx, "sslmode=disable"); err == nil {
				os.Setenv("KAFKASINK_TEST_PG", dsn)
			}
		}
	}
	return stop
}

// engineAnswers reports whether a Docker engine is reachable: a Docker
// client alone, as on machines without an engine, is not enough.
func engineAnswers() bool {
	if os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			return false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return false
	}
	defer cli.Close()
	_, err = cli.Ping(ctx)
	return err == nil
}
