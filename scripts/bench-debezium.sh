#!/usr/bin/env bash
# bench-debezium.sh - Debezium vs kafkasink draining the same backlog into
# the same Kafka broker (issue 9).
#
# Makes a backlog of ROWS inserts (transactions of 1000 rows) into one
# table, with a logical replication slot created BEFORE it, so the WAL to
# decode is fixed; then, alternating, RUNS times each:
#   debezium   the Debezium 3.6.1 PostgreSQL connector as an Embedded
#              Engine (internal/debeziumref, class Produce) writing through
#              JsonConverter and a Kafka producer with Kafka Connect's
#              source-task settings (acks=all, one request in flight),
#              until every record is acknowledged;
#   kafkasink  cmd/kafkasink, -encoder debezium -key-format json,
#              exactly-once, until the slot's confirmed flush position
#              (advanced only after a committed Kafka transaction) reaches
#              the end of the backlog.
# Each run reads its own copy of the first slot (pg_copy_logical_replication_slot)
# and writes its own topic of PARTITIONS partitions. Reported: per run the
# wall time (process start to all records in Kafka, JVM or Go start-up
# included) and peak RSS (GNU time), then the medians and their ratios.
#
# Usage: scripts/bench-debezium.sh [ROWS [RUNS]]    (default 200000 3)
# Environment: KAFKASINK_TEST_PG, KAFKASINK_TEST_BROKERS and
# KAFKASINK_TEST_KAFKA_CLASSPATH (default: from scripts/testenv.sh env);
# PARTITIONS (default 3). Needs java 17+, mvn, go, psql, kcat ($KAFKASINK_TEST_KCAT),
# /usr/bin/time.
# Everything it creates is named bench_dbz_<pid>* and dropped at exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARNESS="$ROOT/internal/debeziumref"
ROWS="${1:-200000}"
RUNS="${2:-3}"
PARTITIONS="${PARTITIONS:-3}"

if [[ -z "${KAFKASINK_TEST_PG:-}" || -z "${KAFKASINK_TEST_BROKERS:-}" ]]; then
  eval "$("$ROOT/scripts/testenv.sh" env)"
fi
PG="$KAFKASINK_TEST_PG"
BROKERS="$KAFKASINK_TEST_BROKERS"
if [[ ! "$PG" =~ ^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([^?]+) ]]; then
  echo "bench-debezium: cannot parse KAFKASINK_TEST_PG (want postgres://user:password@host:port/db)" >&2
  exit 2
fi
PG_USER="${BASH_REMATCH[2]}" PG_PASSWORD="${BASH_REMATCH[3]}" PG_HOST="${BASH_REMATCH[4]}"
PG_PORT="${BASH_REMATCH[5]}" PG_DB="${BASH_REMATCH[6]}"
export PGOPTIONS="-c client_min_messages=warning"
psql_() { psql "$PG" -X -q -v ON_ERROR_STOP=1 -tA "$@"; }
topics_() { java -cp "$KAFKASINK_TEST_KAFKA_CLASSPATH" -Dlog4j2.configurationFile="${KAFKASINK_TEST_KAFKA_TOOLS_LOG4J:-}" \
  org.apache.kafka.tools.TopicCommand --bootstrap-server "$BROKERS" "$@"; }

NAME="bench_dbz_$$"
WORK="$(mktemp -d)"
cleanup() {
  set +e
  for slot in $(psql_ -c "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE '${NAME}%'"); do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      psql_ -c "SELECT pg_drop_replication_slot('$slot') FROM pg_replication_slots WHERE slot_name = '$slot' AND NOT active" >/dev/null 2>&1
      [[ -z "$(psql_ -c "SELECT 1 FROM pg_replication_slots WHERE slot_name = '$slot'")" ]] && break
      sleep 1
    done
  done
  psql_ -c "DROP PUBLICATION IF EXISTS $NAME" -c "DROP TABLE IF EXISTS public.$NAME"
  topics_ --delete --topic "${NAME}.*" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "bench-debezium: building the Debezium harness and cmd/kafkasink" >&2
(cd "$HARNESS" && mvn -B -q compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
CP="$HARNESS/target/classes:$(cat "$HARNESS/target/classpath.txt")"
(cd "$ROOT/cmd/kafkasink" && go build -o "$WORK/kafkasink" .)

echo "bench-debezium: backlog of $ROWS inserts into public.$NAME" >&2
psql_ -c "CREATE TABLE public.$NAME (id bigint PRIMARY KEY, n integer NOT NULL, note text NOT NULL)" \
      -c "CREATE PUBLICATION $NAME FOR TABLE public.$NAME" \
      -c "SELECT pg_create_logical_replication_slot('${NAME}', 'pgoutput')" >/dev/null
for ((from = 1; from <= ROWS; from += 1000)); do
  to=$((from + 999 < ROWS ? from + 999 : ROWS))
  echo "INSERT INTO public.$NAME SELECT i, i % 1000, 'row ' || i || ' of the backlog' FROM generate_series($from, $to) i;"
done | psql_ >/dev/null
END_LSN="$(psql_ -c "SELECT pg_current_wal_insert_lsn()")"
echo "bench-debezium: backlog ends at $END_LSN" >&2

# run_debezium RUN: one Debezium run on its own copy of the slot.
run_debezium() {
  local slot="${NAME}_d$1" prefix="${NAME}_d$1"
  psql_ -c "SELECT pg_copy_logical_replication_slot('${NAME}', '$slot')" >/dev/null
  topics_ --create --topic "$prefix.public.$NAME" --partitions "$PARTITIONS" --replication-factor 1 >/dev/null
  cat >"$WORK/$slot.properties" <<EOF
name=$prefix
connector.class=io.debezium.connector.postgresql.PostgresConnector
offset.storage=org.apache.kafka.connect.storage.MemoryOffsetBackingStore
offset.flush.interval.ms=60000
database.hostname=$PG_HOST
database.port=$PG_PORT
database.user=$PG_USER
database.password=$PG_PASSWORD
database.dbname=$PG_DB
topic.prefix=$prefix
plugin.name=pgoutput
slot.name=$slot
slot.drop.on.stop=false
publication.name=$NAME
publication.autocreate.mode=disabled
table.include.list=public.$NAME
snapshot.mode=no_data
harness.bootstrap.servers=$BROKERS
harness.schemas.enable=false
harness.expect=$ROWS
harness.timeout.s=900
EOF
  /usr/bin/time -f "%e %M" -o "$WORK/time" java -Duser.timezone=UTC -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$CP" io.kafkasink.debeziumref.Produce "$WORK/$slot.properties" 2>"$WORK/$slot.log" ||
    { tail -n 40 "$WORK/$slot.log" >&2; echo "bench-debezium: Debezium run $1 FAILED" >&2; exit 1; }
  grep '^produce:' "$WORK/$slot.log" >&2
  report debezium "$1"
}

# run_kafkasink RUN: one kafkasink run on its own copy of the slot.
run_kafkasink() {
  local slot="${NAME}_k$1" prefix="${NAME}_k$1"
  psql_ -c "SELECT pg_copy_logical_replication_slot('${NAME}', '$slot')" >/dev/null
  # The shell writes its pid and becomes the program (exec), so that the
  # program, not GNU time, gets the SIGTERM below.
  /usr/bin/time -f "%e %M" -o "$WORK/time" bash -c 'echo $$ >"$0"; exec "$@"' "$WORK/pid" \
    "$WORK/kafkasink" -pg "$PG" -brokers "$BROKERS" \
    -slot "$slot" -publication "$NAME" -create=false -sink-id "$prefix" -checkpoint-topic "$prefix.checkpoints" \
    -topic-prefix "$prefix" -partitions "$PARTITIONS" -replication-factor 1 \
    -encoder debezium -key-format json -mode exactly-once -progress 0 -log-level warn 2>"$WORK/$slot.log" &
  local timer=$! deadline=$((SECONDS + 900)) pid=""
  until [[ -s "$WORK/pid" ]]; do sleep 0.01; done
  pid="$(cat "$WORK/pid")"
  # The slot's confirmed flush position moves only after a Write returned:
  # the records up to it are committed in Kafka.
  until [[ "$(psql_ -c "SELECT confirmed_flush_lsn >= '$END_LSN' FROM pg_replication_slots WHERE slot_name = '$slot'")" == t ]]; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
      kill "$pid" 2>/dev/null || true; wait "$timer" || true; tail -n 40 "$WORK/$slot.log" >&2
      echo "bench-debezium: kafkasink run $1 FAILED" >&2; exit 1
    fi
    sleep 0.1
  done
  kill -TERM "$pid"
  wait "$timer" || { tail -n 40 "$WORK/$slot.log" >&2; echo "bench-debezium: kafkasink run $1 did not stop cleanly" >&2; exit 1; }
  rm -f "$WORK/pid"
  report kafkasink "$1"
}

RESULTS="$WORK/results"
# report KIND RUN: checks the run's topic holds every change, read
# read_committed (not timed), and records the run's time and peak RSS.
report() {
  local topic="${NAME}_${1:0:1}$2.public.$NAME" n
  n="$("${KAFKASINK_TEST_KCAT:-kcat}" -C -b "$BROKERS" -t "$topic" -o beginning -e -q \
        -X isolation.level=read_committed -f '\n' | wc -l)"
  if [[ "$n" -ne "$ROWS" ]]; then
    echo "bench-debezium: $1 run $2 left $n records in $topic, want $ROWS" >&2
    exit 1
  fi
  # GNU time first notes a signal that ended the command, if one did.
  read -r secs rss < <(tail -n 1 "$WORK/time")
  printf '%s %s %s %s\n' "$1" "$2" "$secs" "$rss" >>"$RESULTS"
  awk -v k="$1" -v r="$2" -v s="$secs" -v m="$rss" \
    'BEGIN { printf "bench-debezium: %-9s run %s: %6.2f s, peak RSS %4.0f MiB\n", k, r, s, m / 1024 }' >&2
}

for ((i = 1; i <= RUNS; i++)); do
  run_debezium "$i"
  run_kafkasink "$i"
done

awk -v rows="$ROWS" -v runs="$RUNS" '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { n[$1]++; s[$1, n[$1]] = $3; m[$1, n[$1]] = $4 / 1024 }
  END {
    for (k in n) { for (i = 1; i <= n[k]; i++) { ts[i] = s[k, i]; ms[i] = m[k, i] } ; T[k] = median(ts, n[k]); M[k] = median(ms, n[k]) }
    printf "%d changes, %d runs each, medians:\n", rows, runs
    printf "  debezium   %7.2f s  %6.0f MiB peak RSS  %8.0f changes/s\n", T["debezium"], M["debezium"], rows / T["debezium"]
    printf "  kafkasink  %7.2f s  %6.0f MiB peak RSS  %8.0f changes/s\n", T["kafkasink"], M["kafkasink"], rows / T["kafkasink"]
    printf "  ratio (debezium / kafkasink): time %.1fx, peak RSS %.1fx\n", T["debezium"] / T["kafkasink"], M["debezium"] / M["kafkasink"]
  }' "$RESULTS"
