#!/usr/bin/env bash
# Spark's own Kafka connector (the `kafka` format: spark-sql-kafka-0-10) for the installed
# PySpark, fetched with Maven from Maven Central into a cache outside the repository, for
# the interop test tests/interop/test_spark_kafka_format.py and benchmarks/spark_source.py.
#
# Only the jars that PySpark's own jars/ directory lacks are kept (the connector, its
# token provider, kafka-clients, commons-pool2): Spark's Scala library, Hadoop client,
# snappy, lz4 and slf4j are already on its classpath, and a second copy of any of them
# at another version would be a classpath conflict. The jars are meant for `spark.jars`
# (local files): Spark resolves nothing at run time, unlike `spark.jars.packages`, which
# would ask Maven Central (through Ivy) at every session start.
#
# The last line of stdout is the jars' paths, comma-separated, ready for `spark.jars`.
# Idempotent: a stamp file written after a complete copy makes a second run instant.
#
#   PYTHON               the interpreter whose PySpark to match (default: the repository's
#                        .venv/bin/python, else python3)
#   SPARK_KAFKA_VERSION  the connector version to fetch (default: PySpark's own version,
#                        then the fallback below if Maven Central does not serve it)
#   KAFLITE_CACHE        the cache root (default ~/.cache/kaflite)
#
# Exit 0 with the paths; exit 2 when java, mvn or PySpark is missing (the tests skip, or
# fail under CI=true); exit 1 when the fetch itself fails.
set -euo pipefail

# Maven Central serves no spark-sql-kafka-0-10_2.13 4.3.0 (the PySpark installed here is
# 4.3.0; `mvn dependency:get` answers "Could not find artifact"). The newest it serves is
# 4.2.0, built against Spark 4.2.0 with kafka-clients 3.9.2: the same Scala 2.13 and the
# same DataSource V2 interfaces as 4.3, and the interop test runs it on PySpark 4.3.0 (a
# connector that no longer linked would fail there with NoSuchMethodError, not pass).
FALLBACK_VERSION="4.2.0"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

if ! command -v java >/dev/null 2>&1 && [ ! -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; then
  echo "ensure_spark_kafka: java is not installed; Spark cannot run" >&2
  exit 2
fi
# PySpark's version and its jars/ directory, without importing pyspark (0.5 s).
if ! read -r SPARK_VERSION SPARK_JARS < <("$PYTHON" - <<'EOF' 2>/dev/null
import importlib.metadata, importlib.util, os
spec = importlib.util.find_spec("pyspark")
print(importlib.metadata.version("pyspark"), os.path.join(os.path.dirname(spec.origin), "jars"))
EOF
); then
  echo "ensure_spark_kafka: $PYTHON has no PySpark" >&2
  exit 2
fi

CACHE="${KAFLITE_CACHE:-$HOME/.cache/kaflite}"
# Keyed by the PySpark version: which jars are left out depends on PySpark's own.
HOME_DIR="$CACHE/spark-kafka-$SPARK_VERSION"
LIBS="$HOME_DIR/jars"
STAMP="$HOME_DIR/.complete"

print_jars() {
  local first=1 jar
  for jar in "$LIBS"/*.jar; do
    if [ $first = 1 ]; then printf '%s' "$jar"; first=0; else printf ',%s' "$jar"; fi
  done
  printf '\n'
}

if [ -f "$STAMP" ] && [ -z "${SPARK_KAFKA_VERSION:-}" ]; then
  print_jars
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "ensure_spark_kafka: mvn (Maven) is not installed; Spark's Kafka connector cannot be fetched" >&2
  exit 2
fi

mkdir -p "$HOME_DIR"
WORK="$(mktemp -d "$HOME_DIR/.fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

fetch() {  # fetch VERSION: the connector's runtime closure into $WORK/all
  cat > "$WORK/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.kaflite</groupId>
  <artifactId>spark-kafka-runtime</artifactId>
  <version>$1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>$1</version></dependency>
  </dependencies>
</project>
EOF
  rm -rf "$WORK/all"
  mvn -q -B -f "$WORK/pom.xml" "$DEP_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$WORK/all" >"$WORK/mvn.log" 2>&1 \
    && [ -f "$WORK/all/spark-sql-kafka-0-10_2.13-$1.jar" ]
}

if [ -n "${SPARK_KAFKA_VERSION:-}" ]; then
  CANDIDATES="$SPARK_KAFKA_VERSION"
else
  CANDIDATES="$SPARK_VERSION"
  [ "$SPARK_VERSION" = "$FALLBACK_VERSION" ] || CANDIDATES="$CANDIDATES $FALLBACK_VERSION"
fi
VERSION=""
for candidate in $CANDIDATES; do
  echo "ensure_spark_kafka: fetching spark-sql-kafka-0-10_2.13 $candidate with Maven" \
       "for PySpark $SPARK_VERSION" >&2
  if fetch "$candidate"; then VERSION="$candidate"; break; fi
  echo "ensure_spark_kafka: Maven could not fetch $candidate:" >&2
  grep -m1 -E "ERROR|Could not" "$WORK/mvn.log" >&2 || tail -n 5 "$WORK/mvn.log" >&2
done
if [ -z "$VERSION" ]; then
  echo "ensure_spark_kafka: no connector version could be fetched (tried: $CANDIDATES)" >&2
  exit 1
fi

# Keep a jar only when PySpark has no jar of the same name (the name without its version):
# `scala-library-2.13.15` is left out for PySpark's `scala-library-2.13.18`.
rm -rf "$LIBS"
mkdir -p "$LIBS"
name_of() { basename "$1" .jar | sed -E 's/-[0-9][0-9A-Za-z.]*(-[0-9A-Za-z.]+)*$//'; }
declare -A HAVE=()
for jar in "$SPARK_JARS"/*.jar; do HAVE["$(name_of "$jar")"]=1; done
for jar in "$WORK"/all/*.jar; do
  if [ -n "${HAVE["$(name_of "$jar")"]:-}" ]; then
    echo "ensure_spark_kafka: $(basename "$jar"): PySpark has its own" >&2
  else
    cp "$jar" "$LIBS/"
  fi
done
for want in spark-sql-kafka-0-10_2.13 spark-token-provider-kafka-0-10_2.13 kafka-clients commons-pool2; do
  if ! ls "$LIBS/$want"-[0-9]*.jar >/dev/null 2>&1; then
    echo "ensure_spark_kafka: the copy has no $want jar" >&2
    exit 1
  fi
done

echo "connector=$VERSION pyspark=$SPARK_VERSION" > "$STAMP"
print_jars
