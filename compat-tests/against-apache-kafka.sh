#!/usr/bin/env bash
# Calibration: run every compat scenario against the reference Apache Kafka instead of Odradek.
# A scenario that fails here is a wrong test, not a broker bug. Each session (and each restart or
# fault scenario) starts Kafka with ../shared/apache-kafka/run.sh (about 6 s and a JVM each).
#
#   bash compat-tests/against-apache-kafka.sh [pytest args]     # e.g. -k "produce or consume"
#
# APACHE_KAFKA_HOME overrides where Kafka is; KAFKA_HEAP (default 512m) its heap.
set -euo pipefail
cd "$(dirname "$0")/.."
home="${APACHE_KAFKA_HOME:-$(cd .. && pwd)/shared/apache-kafka}"
[ -x "$home/run.sh" ] || home=/work/shared/apache-kafka
[ -f "$home/run.sh" ] || { echo "no Apache Kafka at $home (set APACHE_KAFKA_HOME)" >&2; exit 2; }
python=.venv/bin/python
[ -x "$python" ] || python=/work/main/.venv/bin/python
export KAFKA_HEAP="${KAFKA_HEAP:-512m}"
# Placeholders filled in by compat-tests' BrokerProcess; Kafka advertises the port the retry tests'
# response-dropping proxy listens on.
export COMPAT_BROKER_CMD="env KAFKA_EXTRA_PROPS=advertised.listeners=PLAINTEXT://127.0.0.1:{advertised_port} bash $home/run.sh {port} {data_dir} {controller_port}"
export COMPAT_IGNORE_KNOWN=1
export COMPAT_STARTUP_TIMEOUT="${COMPAT_STARTUP_TIMEOUT:-180}"   # a JVM on a loaded machine
exec "$python" -m pytest compat-tests -p no:cacheprovider "$@"
