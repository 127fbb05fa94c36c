#!/usr/bin/env bash
# debezium-server-capture.sh - regenerate cmd/kafkasink/testdata/debezium-server/debezium-capture.jsonl:
# what the real Debezium 3.6.1 writes for Debezium Server's sample
# configuration (application.properties there) on its workload.
#
# Debezium Server hands its debezium.source.* properties, prefix removed,
# to an Embedded Engine, and its debezium.format.* properties to the key
# and value JsonConverters (schemas.enable true unless the file says
# otherwise). This script does the same with internal/debeziumref's
# Embedded Engine: the file's source properties, with the connection
# replaced by the test PostgreSQL's, offsets kept in memory (the file's
# offset store is Debezium Server's own concern), and a slot and a
# publication named for the run (Debezium creates the publication FOR ALL
# TABLES, publication.autocreate.mode's default) that are dropped at the
# end. It recreates schemas inventory and outside (workload.sql), applies
# workload-changes.sql once the snapshot is done, and stops after the end
# marker (tutorial.inventory.zz_end). At exit both schemas are dropped: do
# not run it while TestDebeziumServerSample runs against the same server.
#
# Usage: scripts/debezium-server-capture.sh
# Environment: KAFKASINK_TEST_PG (default: from scripts/testenv.sh env).
# Needs java 17+, mvn, psql.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARNESS="$ROOT/internal/debeziumref"
DATA="$ROOT/cmd/kafkasink/testdata/debezium-server"
if [[ -z "${KAFKASINK_TEST_PG:-}" ]]; then
  eval "$("$ROOT/scripts/testenv.sh" env)"
fi
PG="$KAFKASINK_TEST_PG"
if [[ ! "$PG" =~ ^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([^?]+) ]]; then
  echo "debezium-server-capture: cannot parse KAFKASINK_TEST_PG (want postgres://user:password@host:port/db)" >&2
  exit 2
fi
PG_USER="${BASH_REMATCH[2]}" PG_PASSWORD="${BASH_REMATCH[3]}" PG_HOST="${BASH_REMATCH[4]}"
PG_PORT="${BASH_REMATCH[5]}" PG_DB="${BASH_REMATCH[6]}"
export PGTZ=UTC PGOPTIONS="-c client_min_messages=warning"
psql_() { psql "$PG" -X -q -v ON_ERROR_STOP=1 "$@"; }

(cd "$HARNESS" && mvn -B -q compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
CP="$HARNESS/target/classes:$(cat "$HARNESS/target/classpath.txt")"

NAME="dbzserver_$$"
WORK="$(mktemp -d)"
cleanup() {
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    psql_ -tAc "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$NAME' AND NOT active" >/dev/null 2>&1 || true
    [[ -n "$(psql_ -tAc "SELECT 1 FROM pg_replication_slots WHERE slot_name = '$NAME'")" ]] || break
    sleep 1
  done
  psql_ -c "DROP PUBLICATION IF EXISTS $NAME" || true
  psql_ -c "DROP SCHEMA IF EXISTS inventory CASCADE; DROP SCHEMA IF EXISTS outside CASCADE" || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# schemas.enable: the file's debezium.format.value.schemas.enable, else
# debezium.format.schemas.enable, else JsonConverter's default.
schemas="$(sed -n 's/^debezium\.format\.\(value\.\)\{0,1\}schemas\.enable=//p' "$DATA/application.properties" | tail -n 1)"
psql_ -f "$DATA/workload.sql"
{
  echo "name=kafka"
  # The source properties as Debezium Server passes them.
  sed -n 's/^debezium\.source\.//p' "$DATA/application.properties"
  # The run's own; later lines win in java.util.Properties.
  cat <<PROPS
offset.storage=org.apache.kafka.connect.storage.MemoryOffsetBackingStore
database.hostname=$PG_HOST
database.port=$PG_PORT
database.user=$PG_USER
database.password=$PG_PASSWORD
database.dbname=$PG_DB
slot.name=$NAME
slot.drop.on.stop=true
publication.name=$NAME
message.prefix.exclude.list=.*
harness.output=$WORK/capture.jsonl
harness.schemas.enable=${schemas:-true}
harness.stop.topic=tutorial.inventory.zz_end
harness.after.snapshot.command=PGTZ=UTC psql '$PG' -X -q -v ON_ERROR_STOP=1 -f '$DATA/workload-changes.sql'
harness.idle.ms=3000
harness.timeout.s=300
PROPS
} >"$WORK/run.properties"
if ! java -Duser.timezone=UTC -cp "$CP" io.kafkasink.debeziumref.Capture "$WORK/run.properties" >"$WORK/run.log" 2>&1; then
  tail -n 60 "$WORK/run.log" >&2
  echo "debezium-server-capture: FAILED (the last 60 lines of its log above)" >&2
  exit 1
fi
mv "$WORK/capture.jsonl" "$DATA/debezium-capture.jsonl"
echo "debezium-server-capture: $(wc -l <"$DATA/debezium-capture.jsonl") records -> ${DATA#"$ROOT"/}/debezium-capture.jsonl" >&2
