#!/usr/bin/env bash
# debezium-capture.sh - regenerate the Debezium golden files in testdata/debezium.
#
# Runs the real Debezium PostgreSQL connector (internal/debeziumref, an
# Embedded Engine built with Maven) against the test PostgreSQL on the
# workload in testdata/debezium, once per configuration and per
# schemas.enable setting, and writes what a Kafka Connect worker with
# JsonConverter would have written to Kafka:
#
#   testdata/debezium/<config>-schemas-<true|false>.jsonl
#
# A configuration that sets harness.converter (avro: Apicurio's Kafka
# Connect AvroConverter, built with the harness's Maven profile "avro")
# is run once, with that converter for key and value, registering its
# schemas in the Schema Registry, and writes instead
#
#   testdata/debezium/<config>-records.jsonl   the records, key and value
#                                              in base64 (Confluent wire format)
#   testdata/debezium/<config>-schemas.json    {"<id>": schema, ...}: every schema
#                                              id those records name, fetched
#                                              from the registry
#
# Its subjects (dbz.dbzconf.*) are deleted from the registry before the
# run and at the end.
#
# Each run: recreate schema dbzconf (workload.sql), create a publication
# and let Debezium create a slot, both named uniquely for the run; start
# Debezium (initial snapshot); once the snapshot is complete and streaming
# is connected, apply workload-changes.sql; stop at the end-marker record
# once no record came for a while; drop the slot and the publication, also
# when the run fails. At exit, whatever happened, schema dbzconf is dropped.
# The schema name is fixed: do not run two captures against one server at
# once.
#
# Usage:
#   scripts/debezium-capture.sh [CONFIG...]    configs: the names of testdata/debezium/configs/*.properties
#                                              (default: all of them)
# Environment:
#   KAFKASINK_TEST_PG   the PostgreSQL URL (default: from scripts/testenv.sh env)
#   DEBEZIUM_SCHEMAS    which schemas.enable settings to run (default: "true false")
#   KAFKASINK_TEST_SCHEMA_REGISTRY  the registry's Confluent API URL, .../apis/ccompat/v7
#                       (default: from scripts/testenv.sh env; used by converter configurations)
#
# Needs java 17+, mvn, psql (and curl, jq for converter configurations). Maven caches the artifacts in ~/.m2.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARNESS="$ROOT/internal/debeziumref"
DATA="$ROOT/testdata/debezium"
CONFIGS=("$@")
if [[ ${#CONFIGS[@]} -eq 0 ]]; then
  for props in "$DATA"/configs/*.properties; do
    CONFIGS+=("$(basename "$props" .properties)")
  done
fi
read -r -a SCHEMAS <<<"${DEBEZIUM_SCHEMAS:-true false}"

if [[ -z "${KAFKASINK_TEST_PG:-}" ]]; then
  eval "$("$ROOT/scripts/testenv.sh" env)"
fi
PG="$KAFKASINK_TEST_PG"
# postgres://user:password@host:port/dbname?params
if [[ ! "$PG" =~ ^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([^?]+) ]]; then
  echo "debezium-capture: cannot parse KAFKASINK_TEST_PG (want postgres://user:password@host:port/db)" >&2
  exit 2
fi
PG_USER="${BASH_REMATCH[2]}" PG_PASSWORD="${BASH_REMATCH[3]}" PG_HOST="${BASH_REMATCH[4]}"
PG_PORT="${BASH_REMATCH[5]}" PG_DB="${BASH_REMATCH[6]}"

# Session time zone of psql and of the JVM: UTC, so nothing depends on the
# machine's zone.
export PGTZ=UTC PGOPTIONS="-c client_min_messages=warning"
psql_() { psql "$PG" -X -q -v ON_ERROR_STOP=1 "$@"; }

# The workload uses hstore, an extension it cannot create itself (see
# testdata/debezium/README.md).
if [[ -z "$(psql_ -tAc "SELECT 1 FROM pg_extension WHERE extname = 'hstore'")" ]]; then
  echo "debezium-capture: the database has no hstore extension, which the workload uses: scripts/testenv.sh up creates it, or run CREATE EXTENSION hstore as a superuser in $PG_DB" >&2
  exit 2
fi

echo "debezium-capture: building the harness" >&2
(cd "$HARNESS" && mvn -B -q compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
CP="$HARNESS/target/classes:$(cat "$HARNESS/target/classpath.txt")"
# converter prints a configuration's harness.converter, "" when it has none.
converter() { sed -n 's/^harness\.converter=//p' "$DATA/configs/$1.properties"; }
CP_AVRO=""
for config in "${CONFIGS[@]}"; do
  if [[ -f "$DATA/configs/$config.properties" && -n "$(converter "$config")" && -z "$CP_AVRO" ]]; then
    (cd "$HARNESS" && mvn -B -q -Pavro dependency:build-classpath -Dmdep.outputFile=target/classpath-avro.txt)
    CP_AVRO="$HARNESS/target/classes:$(cat "$HARNESS/target/classpath-avro.txt")"
    REGISTRY="${KAFKASINK_TEST_SCHEMA_REGISTRY:?KAFKASINK_TEST_SCHEMA_REGISTRY is not set: start the environment with a registry}"
  fi
done

WORK="$(mktemp -d)"
SLOT="" PUB=""
cleanup() {
  # Only the slot and publication this run created. The slot is dropped by
  # Debezium on a clean stop (slot.drop.on.stop); after a crash it may
  # still be active for a moment until the server notices the dead walsender.
  if [[ -n "$SLOT" ]]; then
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      if psql_ -tAc "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                     WHERE slot_name = '$SLOT' AND NOT active" >/dev/null 2>&1 &&
         [[ -z "$(psql_ -tAc "SELECT 1 FROM pg_replication_slots WHERE slot_name = '$SLOT'")" ]]; then
        break
      fi
      sleep 1
    done
  fi
  [[ -z "$PUB" ]] || psql_ -c "DROP PUBLICATION IF EXISTS $PUB" || true
  SLOT="" PUB=""
}
# deleteSubjects deletes the registry's subjects of the captured topics.
deleteSubjects() {
  [[ -n "$CP_AVRO" ]] || return 0
  local s
  for s in $(curl -fsS "$REGISTRY/subjects" | jq -r '.[] | select(startswith("dbz.dbzconf."))'); do
    curl -fsS -o /dev/null -X DELETE "$REGISTRY/subjects/$s" || true
    curl -fsS -o /dev/null -X DELETE "$REGISTRY/subjects/$s?permanent=true" || true
  done
}
trap 'cleanup; deleteSubjects; psql_ -c "DROP SCHEMA IF EXISTS dbzconf CASCADE" || true; rm -rf "$WORK"' EXIT

for config in "${CONFIGS[@]}"; do
  props="$DATA/configs/$config.properties"
  [[ -f "$props" ]] || { echo "debezium-capture: no configuration $props" >&2; exit 2; }
  conv="$(converter "$config")"
  runs=("${SCHEMAS[@]}") jar="$CP"
  if [[ -n "$conv" ]]; then
    runs=(converter) jar="$CP_AVRO"
  fi
  for schemas in "${runs[@]}"; do
    out="$DATA/$config-schemas-$schemas.jsonl"
    [[ -z "$conv" ]] || out="$DATA/$config-records.jsonl"
    name="dbzref_${config//-/_}_${schemas}_$$"
    SLOT="$name" PUB="$name"
    echo "debezium-capture: $config schemas.enable=$schemas -> ${out#"$ROOT"/}" >&2
    # A converter run registers its schemas afresh: the subjects of the
    # previous configuration's are deleted first, whose versions the
    # registry's compatibility rules would compare the new ones with.
    [[ -z "$conv" ]] || deleteSubjects
    psql_ -f "$DATA/workload.sql"
    psql_ -c "CREATE PUBLICATION $PUB FOR TABLES IN SCHEMA dbzconf"
    run="$WORK/$name.properties"
    {
      cat <<EOF
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
slot.name=$SLOT
slot.drop.on.stop=true
publication.name=$PUB
publication.autocreate.mode=disabled
schema.include.list=dbzconf
# Logical decoding messages of other programs on the server (kafkasink's
# heartbeats) are not the workload's: the workload emits none.
message.prefix.exclude.list=.*
snapshot.mode=initial
harness.output=$WORK/$name.jsonl
harness.schemas.enable=$schemas
harness.stop.topic=dbz.dbzconf.zz_end
harness.after.snapshot.command=PGTZ=UTC psql '$PG' -X -q -v ON_ERROR_STOP=1 -f '$DATA/workload-changes.sql'
harness.idle.ms=3000
harness.timeout.s=300
EOF
      if [[ -n "$conv" ]]; then
        echo "harness.converter.apicurio.registry.url=${REGISTRY%/apis/ccompat/v7}/apis/registry/v2"
      fi
      cat "$props"
    } >"$run"
    start=$(date +%s.%N)
    if ! java -Duser.timezone=UTC -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
        -cp "$jar" io.kafkasink.debeziumref.Capture "$run" >"$WORK/$name.log" 2>&1; then
      tail -n 60 "$WORK/$name.log" >&2
      echo "debezium-capture: $config schemas.enable=$schemas FAILED (the last 60 lines of its log above)" >&2
      exit 1
    fi
    end=$(date +%s.%N)
    grep '^harness:' "$WORK/$name.log" >&2 || true
    cleanup
    mv "$WORK/$name.jsonl" "$out"
    if [[ -n "$conv" ]]; then
      # Every schema id of the records (bytes 1-4 of the key and value),
      # with the schema the registry's Confluent API gives for it.
      ids="$(jq -r '.key, .value | select(. != null)' "$out" | while read -r b; do
        printf '%s' "$b" | base64 -d | head -c 5 | od -An -tu1 | awk '{ print $2 * 16777216 + $3 * 65536 + $4 * 256 + $5 }'
      done | sort -nu)"
      for id in $ids; do
        curl -fsS "$REGISTRY/schemas/ids/$id" | jq --arg id "$id" '{($id): (.schema | fromjson)}'
      done | jq -s 'add' >"$DATA/$config-schemas.json"
      echo "debezium-capture: $(wc -w <<<"$ids") schemas -> $DATA/$config-schemas.json" >&2
    fi
    awk -v n="$(wc -l <"$out")" -v s="$start" -v e="$end" \
      'BEGIN { printf "debezium-capture: %d records in %.1f s\n", n, e - s }' >&2
  done
done
