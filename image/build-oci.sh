#!/usr/bin/env bash
# Builds Odradek's container image (the one image/Containerfile describes) without a container engine:
# a Debian bookworm root file system from Debian's packages (mmdebstrap: python3, tini), the odradek
# wheel and its dependencies from PyPI in a venv at /opt/odradek, a non-root user 1000, packed by umoci
# into an OCI image layout. Load it with `skopeo copy oci:image/out/oci:odradek:0.1.0 ...` or run it
# with runc (`umoci unpack`), as tests/image does.
#
#   bash image/build-oci.sh [OUT_DIR]       # default image/out; needs root (chroot), apt for the tools
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mkdir -p "${1:-image/out}" && cd "${1:-image/out}" && pwd)"
python="${PYTHON:-python3}"
version="$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
tag="odradek:$version"
log() { echo "image/build-oci.sh: $*" >&2; }

missing=()
for tool in mmdebstrap umoci; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work="$(mktemp -d /tmp/odradek-image.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# Wheels for the image's Python (bookworm's 3.11: the same cp311 ABI as the builder's).
log "building the odradek wheel and fetching its dependencies"
"$python" -m pip wheel -q --wheel-dir "$work/wheels" . >/dev/null

log "debootstrapping bookworm (minbase + python3, tini)"
mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,tini,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$work/rootfs" http://deb.debian.org/debian

log "installing odradek into /opt/odradek"
mkdir -p "$work/rootfs/tmp/wheels"
cp "$work"/wheels/*.whl "$work/rootfs/tmp/wheels/"
chroot "$work/rootfs" /usr/bin/python3 -m venv /opt/odradek
chroot "$work/rootfs" /opt/odradek/bin/pip install -q --no-index --no-cache-dir \
    --disable-pip-version-check --find-links /tmp/wheels odradek
rm -rf "$work/rootfs/tmp/wheels" "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*
# the user the chart runs as (runAsUser 1000) and its data volume
echo "odradek:x:1000:1000:Odradek broker:/var/lib/odradek:/usr/sbin/nologin" >> "$work/rootfs/etc/passwd"
echo "odradek:x:1000:" >> "$work/rootfs/etc/group"
install -d -o 1000 -g 1000 "$work/rootfs/var/lib/odradek"

log "packing the OCI image $tag into $out/oci"
rm -rf "$out/oci"
umoci init --layout "$out/oci"
umoci new --image "$out/oci:$tag"
umoci unpack --image "$out/oci:$tag" "$work/bundle" >/dev/null
rm -rf "$work/bundle/rootfs"
mv "$work/rootfs" "$work/bundle/rootfs"
umoci repack --image "$out/oci:$tag" "$work/bundle"
umoci config --image "$out/oci:$tag" \
    --config.user 1000:1000 --config.workingdir /var/lib/odradek \
    --config.env PATH=/opt/odradek/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env PYTHONUNBUFFERED=1 \
    --config.entrypoint tini --config.entrypoint -- --config.entrypoint odradek \
    --config.cmd serve --config.cmd --override --config.cmd log.dirs=/var/lib/odradek/data \
    --config.cmd --override --config.cmd listeners=PLAINTEXT://:9092 \
    --config.cmd --override --config.cmd advertised.listeners=PLAINTEXT://localhost:9092 \
    --config.volume /var/lib/odradek \
    --config.exposedports 9092/tcp --config.exposedports 9093/tcp --config.exposedports 9404/tcp \
    --config.label org.opencontainers.image.title=odradek \
    --config.label "org.opencontainers.image.version=$version" \
    --history.comment "image/build-oci.sh: bookworm minbase, python3, tini, odradek $version"
umoci gc --layout "$out/oci"
log "done: $out/oci ($tag), $(du -sh "$out/oci" | cut -f1)"
