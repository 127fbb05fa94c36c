#!/usr/bin/env bash
# capture-incremental.sh - capture the real Debezium 3.6.1's incremental
# snapshot, asked for through its signal table, on the conformance
# workload (issue 26), into testdata/debezium/incremental-schemas-false.jsonl.
#
# Debezium starts with snapshot.mode=no_data (so every read record is the
# incremental snapshot's) and signal.data.collection=dbzconf.zz_signal.
# Once it streams, the command below creates the signal table (the
# publication, FOR TABLES IN SCHEMA dbzconf, takes it in), inserts one
# execute-snapshot row naming every workload table that has a key, waits
# 15 s for the snapshot to finish, then applies workload-changes.sql,
# whose last row (dbzconf.zz_end) ends the capture. Debezium's own window
# rows (its default watermarking inserts them into the signal table) are
# in the capture too, on topic dbz.dbzconf.zz_signal.
#
# Usage: internal/debeziumref/capture-incremental.sh
# Environment: KAFKASINK_TEST_PG (default: from scripts/testenv.sh env).
# Needs java 17+, mvn, psql. Do not run two captures against one server
# at once (schema dbzconf is fixed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HARNESS="$ROOT/internal/debeziumref"
DATA="$ROOT/testdata/debezium"
if [[ -z "${KAFKASINK_TEST_PG:-}" ]]; then
  eval "$("$ROOT/scripts/testenv.sh" env)"
fi
PG="$KAFKASINK_TEST_PG"
if [[ ! "$PG" =~ ^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([^?]+) ]]; then
  echo "capture-incremental: cannot parse KAFKASINK_TEST_PG" >&2
  exit 2
fi
PG_USER="${BASH_REMATCH[2]}" PG_PASSWORD="${BASH_REMATCH[3]}" PG_HOST="${BASH_REMATCH[4]}"
PG_PORT="${BASH_REMATCH[5]}" PG_DB="${BASH_REMATCH[6]}"
export PGTZ=UTC PGOPTIONS="-c client_min_messages=warning"
psql_() { psql "$PG" -X -q -v ON_ERROR_STOP=1 "$@"; }

(cd "$HARNESS" && mvn -B -q compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
CP="$HARNESS/target/classes:$(cat "$HARNESS/target/classpath.txt")"
WORK="$(mktemp -d)"
NAME="dbzref_incremental_$$"
trap 'psql_ -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"'$NAME'"' AND NOT active" >/dev/null 2>&1 || true;
      psql_ -c "DROP PUBLICATION IF EXISTS $NAME" || true; psql_ -c "DROP SCHEMA IF EXISTS dbzconf CASCADE" || true; rm -rf "$WORK"' EXIT

psql_ -f "$DATA/workload.sql"
psql_ -c "CREATE PUBLICATION $NAME FOR TABLES IN SCHEMA dbzconf"
# Every workload table with a key: no_pk has none, which kafkasink
# refuses to backfill (Debezium would need a surrogate-key).
TABLES="$(sed -n 's/^CREATE TABLE \(dbzconf\.[a-z_]*\).*/"\1"/p' "$DATA/workload.sql" | grep -v -e no_pk -e zz_end | paste -sd, -)"
SIGNAL="{\"data-collections\":[$TABLES],\"type\":\"incremental\"}"
echo "CREATE TABLE dbzconf.zz_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048) NULL);" >"$WORK/signal-table.sql"
echo "INSERT INTO dbzconf.zz_signal VALUES ('conformance-1', 'execute-snapshot', '$SIGNAL');" >"$WORK/signal.sql"
cat >"$WORK/cmd.sh" <<CMD
set -e
psql '$PG' -X -q -v ON_ERROR_STOP=1 -f '$WORK/signal-table.sql'
sleep 2
psql '$PG' -X -q -v ON_ERROR_STOP=1 -f '$WORK/signal.sql'
sleep 15
PGTZ=UTC psql '$PG' -X -q -v ON_ERROR_STOP=1 -f '$DATA/workload-changes.sql'
CMD
cat >"$WORK/run.properties" <<PROPS
name=dbzref
connector.class=io.debezium.connector.postgresql.PostgresConnector
offset.storage=org.apache.kafka.connect.storage.MemoryOffsetBackingStore
offset.flush.interval.ms=60000
database.hostname=$PG_HOST
database.port=$PG_PORT
database.user=$PG_USER
database.password=$PG_PASSWORD
database.dbname=$PG_DB
topic.prefix=dbz
plugin.name=pgoutput
slot.name=$NAME
slot.drop.on.stop=true
publication.name=$NAME
publication.autocreate.mode=disabled
schema.include.list=dbzconf
message.prefix.exclude.list=.*
snapshot.mode=no_data
signal.data.collection=dbzconf.zz_signal
harness.output=$WORK/out.jsonl
harness.schemas.enable=false
harness.stop.topic=dbz.dbzconf.zz_end
harness.after.snapshot.command=bash '$WORK/cmd.sh'
harness.idle.ms=3000
harness.timeout.s=300
PROPS
java -Duser.timezone=UTC -Dorg.slf4j.simpleLogger.defaultLogLevel=info -cp "$CP" io.kafkasink.debeziumref.Capture "$WORK/run.properties" >"$WORK/log" 2>&1 ||
  { tail -n 60 "$WORK/log" >&2; echo "capture-incremental: FAILED" >&2; exit 1; }
grep '^harness:' "$WORK/log" >&2 || true
mv "$WORK/out.jsonl" "$DATA/incremental-schemas-false.jsonl"
