#!/usr/bin/env bash
# Pack Ray for the GPU machine, which has no Ray and takes at most 64 MiB of carried files (DEVELOPERS.md, "Carrying
# Ray to the GPU machine"). Ray's manylinux wheel unpacks to about 240 MB; this keeps what `ray.init`, actors and tasks
# import, drops the libraries kbstudy does not use, and recompresses with xz into .device/ray.tar.xz (git-ignored).
#
#   scripts/pack_ray.sh [PYTHON_TAG] [RAY_VERSION]      e.g. scripts/pack_ray.sh cp312 2.60.0
#
# PYTHON_TAG is the GPU image's CPython, default cp312: its records say python_version 3.12.3 (check it there first:
# python -c "import sys; print(sys.version)"); Ray's
# compiled parts (_raylet.so, raylet, gcs_server) are built per CPython version. RAY_VERSION defaults to the Ray
# installed here, so the CPU tests and the GPU run use one version.
#
# On the GPU machine (the run command carries .device):
#   source scripts/unpack_ray.sh            # unpacks into /tmp/kbstudy-ray and puts it on PYTHONPATH
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:-cp312}"
VERSION="${2:-$(python -c 'import importlib.metadata as m; print(m.version("ray"))' 2>/dev/null || echo 2.60.0)}"
PYVER="${TAG#cp}"; PYVER="${PYVER:0:1}.${PYVER:1}"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
mkdir -p .device "$WORK/wheels" "$WORK/ray" "$WORK/deps"
PIP=(python -m pip download --quiet --only-binary=:all: --platform manylinux2014_x86_64 --platform
     manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --implementation cp --python-version "$PYVER" --abi "$TAG"
     --abi abi3 --abi none)
"${PIP[@]}" --no-deps -d "$WORK/wheels" "ray==$VERSION"
# Ray's own requirements (its wheel's Requires-Dist without extras) and theirs; unpack_ray.sh puts on the path only
# those the GPU image cannot import (it has PyYAML, typer's click, and transformers' requests, filelock, packaging)
"${PIP[@]}" -d "$WORK/deps" "msgpack>=1.0.0,<2.0.0" "protobuf>=3.20.3" jsonschema click filelock "packaging>=24.2" \
    requests pyyaml
python - "$WORK/wheels"/ray-*.whl "$WORK/ray" <<'EOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
EOF
# executables lose their mode bit in a zip extraction: raylet and gcs_server must run
find "$WORK/ray/ray/core/src" -type f \( -name raylet -o -name gcs_server \) -exec chmod +x {} +
# not imported by ray.init, actors, tasks or the node's agents: the Java jars, the AI libraries, the dashboard's
# built web client (the dashboard head is off: include_dashboard=False), tests and caches
( cd "$WORK/ray/ray" && rm -rf jars rllib data serve train tune llm workflow air/examples dashboard/client \
    tests )
find "$WORK/ray" -name __pycache__ -type d -prune -exec rm -rf {} +
find "$WORK/ray" -name '*.so' -exec strip --strip-unneeded {} + 2>/dev/null || true
strip --strip-unneeded "$WORK/ray/ray/core/src/ray/raylet/raylet" "$WORK/ray/ray/core/src/ray/gcs/gcs_server" \
    2>/dev/null || true
cp "$WORK/deps"/*.whl "$WORK/ray/"
tar -C "$WORK/ray" -cf - . | xz -T0 "-${XZ_LEVEL:-9}" > .device/ray.tar.xz
echo ".device/ray.tar.xz: $(du -h .device/ray.tar.xz | cut -f1) (Ray $VERSION, $TAG; $(ls "$WORK/deps" | wc -l) wheels beside it)"
