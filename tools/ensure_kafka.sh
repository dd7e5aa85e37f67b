#!/usr/bin/env bash
# Apache Kafka's jars for the interop tests (tests/interop/), fetched with Maven from
# Maven Central: there is no release tarball to download here, only the registry.
#
# Prints the directory that holds the jars (libs/) as its last line of stdout, so the
# tests and benchmarks never need to know the version: it is pinned here, in one place.
# Idempotent: a stamp file written after a complete copy makes a second run instant.
#
#   KAFKA_VERSION   which 4.x release (default: the pin below)
#   KAFLITE_CACHE   the cache root, outside the repository (default ~/.cache/kaflite)
#
# Exit 0 with the path on success; exit 2 when java or mvn is missing (the tests skip,
# or fail under CI=true); exit 1 when the fetch itself fails.
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
# The SLF4J binding: Kafka 4.x resolves slf4j-api 1.7.x and brings log4j-core 2.25.x
# through kafka-server, but no binding between them, so without this jar the broker
# logs nothing ("SLF4J: Failed to load class StaticLoggerBinder") and a failed start
# is silent. Pinned to the log4j-core release kafka-server pulls in for 4.4.0.
LOG4J_VERSION="${LOG4J_VERSION:-2.25.5}"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

CACHE="${KAFLITE_CACHE:-$HOME/.cache/kaflite}"
HOME_DIR="$CACHE/kafka-$KAFKA_VERSION"
LIBS="$HOME_DIR/libs"
STAMP="$HOME_DIR/.complete"

# Java first, even when the jars are cached: without it they are of no use.
if ! command -v java >/dev/null 2>&1 && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; then
  echo "ensure_kafka: java is not installed; Apache Kafka cannot run" >&2
  exit 2
fi
if [ -f "$STAMP" ] && [ -f "$HOME_DIR/log4j2.properties" ]; then
  echo "$LIBS"
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "ensure_kafka: mvn (Maven) is not installed; Apache Kafka cannot be fetched" >&2
  exit 2
fi

mkdir -p "$HOME_DIR"
WORK="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# A pom with no code of its own: copy-dependencies resolves the runtime closure of
# these four artifacts. kafka_2.13 is the broker (server, raft, metadata, storage,
# coordinators, Scala, and kafka.tools.StorageTool); kafka-tools is the CLI classes.
cat > "$WORK/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.kaflite</groupId>
  <artifactId>apache-kafka-runtime</artifactId>
  <version>$KAFKA_VERSION</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId>
      <version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF

echo "ensure_kafka: fetching Apache Kafka $KAFKA_VERSION with Maven into $LIBS" >&2
rm -rf "$LIBS"
if ! mvn -q -B -f "$WORK/pom.xml" "$DEP_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$LIBS" >"$WORK/mvn.log" 2>&1; then
  tail -n 30 "$WORK/mvn.log" >&2
  echo "ensure_kafka: Maven could not fetch Apache Kafka $KAFKA_VERSION" >&2
  exit 1
fi
if ! ls "$LIBS"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1; then
  echo "ensure_kafka: the copy has no kafka_2.13-$KAFKA_VERSION.jar" >&2
  exit 1
fi

# WARN and above, to a file named by the launcher (-Dkaflite.kafka.log=...): one file per
# node, so a broker that fails to start says why; nothing on stdout, which no one reads.
cat > "$HOME_DIR/log4j2.properties" <<'EOF'
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kaflite.kafka.log:-kafka-server.log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
EOF

echo "$KAFKA_VERSION" > "$STAMP"
echo "$LIBS"
