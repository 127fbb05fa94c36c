#!/usr/bin/env bash
# testenv_smoke.sh - end-to-end check that `scripts/testenv.sh up` produced a
# usable environment: a record goes through every Kafka listener and auth
# mechanism with kcat, the Java console consumer reads committed transactional
# data, PostgreSQL can create (and drop) a pgoutput logical slot, and the
# Schema Registry registers an Avro schema and refuses an incompatible one.
#
# Usage: scripts/testenv.sh up [--brokers 3] && scripts/testenv_smoke.sh
# Exits non-zero if any check fails; prints "smoke: N passed, N failed".
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TESTENV="$HERE/testenv.sh"

env_sh="$("$TESTENV" env)" || { echo "smoke: test environment is not up" >&2; exit 1; }
eval "$env_sh"

KCAT="$KAFKASINK_TEST_KCAT"
RUN="smoke-$(date +%s)-$$"
TOPIC="testenv-$RUN"
passed=0
failed=0
T0=$(date +%s)

check() {
  local name="$1"
  shift
  local out t
  t=$(date +%s)
  if out="$("$@" 2>&1)"; then
    passed=$((passed + 1))
    printf 'ok   %s (%ss)\n' "$name" "$(($(date +%s) - t))"
  else
    failed=$((failed + 1))
    printf 'FAIL %s (%ss)\n' "$name" "$(($(date +%s) - t))"
    printf '%s\n' "$out" | tail -n 15 | sed 's/^/     /'
  fi
}

# kcat connection arguments per listener / mechanism, into the array CONN.
conn_args() {
  case "$1" in
    plaintext) CONN=(-b "$KAFKASINK_TEST_BROKERS") ;;
    SCRAM-SHA-256 | SCRAM-SHA-512 | PLAIN)
      CONN=(-b "$KAFKASINK_TEST_SASL_SSL_BROKERS" -X security.protocol=SASL_SSL
        -X "sasl.mechanisms=$1" -X "sasl.username=$KAFKASINK_TEST_SASL_USER"
        -X "sasl.password=$KAFKASINK_TEST_SASL_PASSWORD" -X "ssl.ca.location=$KAFKASINK_TEST_CA")
      ;;
    OAUTHBEARER)
      # librdkafka builds an unsigned JWT itself; the broker's unsecured
      # validator accepts it (test only).
      CONN=(-b "$KAFKASINK_TEST_SASL_SSL_BROKERS" -X security.protocol=SASL_SSL
        -X sasl.mechanisms=OAUTHBEARER -X enable.sasl.oauthbearer.unsecure.jwt=true
        -X "sasl.oauthbearer.config=principal=$KAFKASINK_TEST_SASL_USER" -X "ssl.ca.location=$KAFKASINK_TEST_CA")
      ;;
    mtls)
      CONN=(-b "$KAFKASINK_TEST_MTLS_BROKERS" -X security.protocol=SSL
        -X "ssl.ca.location=$KAFKASINK_TEST_CA"
        -X "ssl.certificate.location=$KAFKASINK_TEST_CLIENT_CERT"
        -X "ssl.key.location=$KAFKASINK_TEST_CLIENT_KEY")
      ;;
    cluster) CONN=(-b "$KAFKASINK_TEST_BROKERS3") ;;
  esac
}

# Produces one record over listener $1 to topic $2 and reads the topic back
# over the same listener until that record shows up.
roundtrip() {
  local how="$1" topic="$2" value="v-$1-$RUN"
  local CONN=()
  conn_args "$how"
  printf 'k-%s:%s\n' "$how" "$value" | "$KCAT" "${CONN[@]}" -P -t "$topic" -K: -X acks=all
  "$KCAT" "${CONN[@]}" -C -t "$topic" -o beginning -e -q -f '%k=%s\n' -m 30 | grep -qxF "k-$how=$value"
}

# The listener must refuse a client without a certificate (ssl.client.auth=required).
mtls_requires_cert() {
  ! "$KCAT" -b "$KAFKASINK_TEST_MTLS_BROKERS" -X security.protocol=SSL \
    -X "ssl.ca.location=$KAFKASINK_TEST_CA" -L -m 2 >/dev/null 2>&1
}

# A wrong password must fail: proves SASL really authenticates.
sasl_rejects_bad_password() {
  ! "$KCAT" -b "$KAFKASINK_TEST_SASL_SSL_BROKERS" -X security.protocol=SASL_SSL \
    -X sasl.mechanisms=SCRAM-SHA-256 -X "sasl.username=$KAFKASINK_TEST_SASL_USER" \
    -X sasl.password=wrong -X "ssl.ca.location=$KAFKASINK_TEST_CA" -L -m 2 >/dev/null 2>&1
}

kafka_tool() { "$TESTENV" tool "$@"; }

create_topic() {
  kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$1" --create \
    --topic "$2" --partitions "$3" --replication-factor "$4"
}

# Records the roundtrips put on $TOPIC before the transactional one.
produced=6

# A record produced inside a committed transaction (kcat with transactional.id)
# must be visible to the Java console consumer in read_committed mode.
java_read_committed() {
  local value="txn-$RUN"
  printf 'k-txn:%s\n' "$value" | "$KCAT" -b "$KAFKASINK_TEST_BROKERS" -P -t "$TOPIC" -K: \
    -X "transactional.id=$RUN"
  kafka_tool org.apache.kafka.tools.consumer.ConsoleConsumer \
    --bootstrap-server "$KAFKASINK_TEST_BROKERS" --topic "$TOPIC" --from-beginning \
    --isolation-level read_committed --timeout-ms 30000 --max-messages "$((produced + 1))" \
    --formatter-property print.key=true --formatter-property key.separator== |
    grep -qxF "k-txn=$value"
}

pg_slot() {
  local slot="smoke_${RUN//-/_}"
  psql -X -v ON_ERROR_STOP=1 -At "$KAFKASINK_TEST_PG" <<EOF
SHOW wal_level;
SELECT lsn IS NOT NULL FROM pg_create_logical_replication_slot('$slot', 'pgoutput');
SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND plugin = 'pgoutput';
SELECT pg_drop_replication_slot('$slot');
EOF
}

# The Schema Registry registers an Avro schema, refuses a change its
# global compatibility level (BACKWARD) forbids, and forgets the subject.
registry_avro() {
  local url="$KAFKASINK_TEST_SCHEMA_REGISTRY" subject="smoke-$RUN-value" ct='Content-Type: application/vnd.schemaregistry.v1+json'
  local v1='{"schema":"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}"}'
  local v2='{"schema":"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},{\"name\":\"b\",\"type\":\"int\"}]}"}'
  curl -sf -X POST -H "$ct" --data "$v1" "$url/subjects/$subject/versions" | grep -q '"id"' || return 1
  [[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "$ct" --data "$v2" "$url/subjects/$subject/versions")" == 409 ]] || return 1
  curl -sf -X DELETE "$url/subjects/$subject" >/dev/null
}

check "create topic $TOPIC (PLAINTEXT, Java TopicCommand)" create_topic "$KAFKASINK_TEST_BROKERS" "$TOPIC" 1 1
check "kcat PLAINTEXT $KAFKASINK_TEST_BROKERS" roundtrip plaintext "$TOPIC"
for mech in SCRAM-SHA-256 SCRAM-SHA-512 PLAIN OAUTHBEARER; do
  check "kcat SASL_SSL $mech $KAFKASINK_TEST_SASL_SSL_BROKERS" roundtrip "$mech" "$TOPIC"
done
check "kcat mTLS $KAFKASINK_TEST_MTLS_BROKERS" roundtrip mtls "$TOPIC"
check "mTLS listener rejects a client without certificate" mtls_requires_cert
check "SASL_SSL rejects a wrong password" sasl_rejects_bad_password
check "Java ConsoleConsumer read_committed sees a committed transaction" java_read_committed
if [[ -n "${KAFKASINK_TEST_BROKERS3:-}" ]]; then
  check "create topic $TOPIC-rf3 (3-node cluster, RF 3)" create_topic "$KAFKASINK_TEST_BROKERS3" "$TOPIC-rf3" 3 3
  check "kcat 3-node cluster $KAFKASINK_TEST_BROKERS3 acks=all" roundtrip cluster "$TOPIC-rf3"
fi
check "PostgreSQL pgoutput logical slot create/drop" pg_slot
if [[ -n "${KAFKASINK_TEST_SCHEMA_REGISTRY:-}" ]]; then
  check "Schema Registry $KAFKASINK_TEST_SCHEMA_REGISTRY: Avro schema registered, incompatible one refused" registry_avro
fi

echo "smoke: took $(($(date +%s) - T0))s"
echo "smoke: $passed passed, $failed failed"
((failed == 0))
