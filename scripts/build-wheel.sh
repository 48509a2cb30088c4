#!/usr/bin/env bash
# The wheel users install (issue 27): `python -m build` makes a linux_x86_64 wheel whose
# extensions link this machine's HarfBuzz, fribidi, libunibreak, libthai, libdeflate and ICU's
# libicuuc (and what they pull in: freetype, graphite2, libpng, brotli, libdatrie,
# libicudata with ICU's Lao, Burmese and Khmer dictionaries, 31 MB).  `auditwheel repair`
# copies those libraries into the wheel (stagedoor.libs/, names hashed so they never
# clash with the host's), points the extensions' RPATH at them with patchelf, and tags
# the wheel manylinux_2_X for the oldest glibc its symbols allow: manylinux_2_35 when
# built on Debian 12 (glibc 2.36): libthai and libpng here use 2.33/2.34 symbols, and
# libicuuc needs GCC 12's libstdc++ (GLIBCXX_3.4.30), which auditwheel's policy puts at
# 2.35 (libstdc++ stays the host's, as libc).
# libz, libc and libm stay the host's (manylinux policy: every Linux has them).
#
# libthai's word-break dictionary is data, not a library: it is added at
# stagedoor/data/libthai/thbrk.tri (RECORD updated), and stagedoor.thai_dictionary
# points libthai at it when the host has no /usr/share/libthai (libthai-data).  Fonts
# stay a runtime system package (fonts-noto-core, fonts-noto-cjk, fonts-symbola;
# README "Install"): stagedoor never ships or downloads fonts.
#
#   bash scripts/build-wheel.sh OUTDIR [WHEEL]    (WHEEL: repair that one, do not build)
#
# Prints `auditwheel show` of the result; the repaired wheel is the only .whl in OUTDIR.
# Needs .venv with the dev extra (build, auditwheel, patchelf from PyPI).
#
# Another glibc (an older one, for more hosts): build inside a manylinux image, where
# the native libraries are compiled against that image's old glibc.  No container runs
# on this project's machine, so this is documented, not tested here:
#   docker run --rm -v "$PWD":/io quay.io/pypa/manylinux_2_28_x86_64 bash -c '
#     dnf install -y harfbuzz-devel fribidi-devel libthai-devel zlib-devel libdeflate-devel &&
#     (build libunibreak from source: it is not in the image repositories) &&
#     /opt/python/cp311-cp311/bin/python -m build --wheel -o /tmp/w /io &&
#     auditwheel repair -w /io/wheelhouse /tmp/w/*.whl'
# or let cibuildwheel do the same for every CPython (>= 3.11) in one go, this script as
# its repair step (the images have auditwheel and patchelf; PYTHON: the image's python):
#   CIBW_BUILD='cp311-* cp312-* cp313-*' CIBW_SKIP='*musllinux*' \
#   CIBW_BEFORE_ALL_LINUX='dnf install -y harfbuzz-devel fribidi-devel libthai-devel ...' \
#   CIBW_REPAIR_WHEEL_COMMAND_LINUX='PYTHON=python bash scripts/build-wheel.sh {dest_dir} {wheel}' \
#   pipx run cibuildwheel
# (the Thai dictionary is then the image's /usr/share/libthai/thbrk.tri).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build-wheel.sh OUTDIR [WHEEL]}
wheel=${2:-}
PY=${PYTHON:-.venv/bin/python}
export PATH="$PWD/.venv/bin:$PATH"   # auditwheel runs patchelf by name
for tool in auditwheel patchelf; do
    command -v "$tool" >/dev/null || {
        echo "build-wheel: $tool not found: .venv/bin/pip install auditwheel patchelf" >&2
        exit 1; }
done
dictionary=${LIBTHAI_DICTDIR:-/usr/share/libthai}/thbrk.tri
[ -f "$dictionary" ] || {
    echo "build-wheel: no $dictionary: apt-get install libthai-data" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -z "$wheel" ]; then
    echo "build-wheel: python -m build --wheel"
    "$PY" -m build --wheel --outdir "$work/raw" . >"$work/build.log" 2>&1 \
        || { cat "$work/build.log"; exit 1; }
    wheel=$(ls "$work"/raw/*.whl)
fi
echo "build-wheel: auditwheel repair $(basename "$wheel")"
auditwheel repair --wheel-dir "$work/repaired" "$wheel" >"$work/repair.log" 2>&1 \
    || { cat "$work/repair.log"; exit 1; }
repaired=$(ls "$work"/repaired/*.whl)

echo "build-wheel: adding libthai's dictionary ($dictionary)"
"$PY" - "$repaired" "$dictionary" <<'PY'
"""Add the dictionary to the wheel and its RECORD (a wheel's files are all listed there
with their sha256, or pip refuses it)."""
import base64
import hashlib
import os
import sys
import zipfile

wheel, dictionary = sys.argv[1], sys.argv[2]
arcname = "stagedoor/data/libthai/thbrk.tri"
data = open(dictionary, "rb").read()
digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
tmp = wheel + ".tmp"
with zipfile.ZipFile(wheel) as src, \
        zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        body = src.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            lines = [line for line in body.decode().splitlines() if line]
            lines.insert(-1, f"{arcname},sha256={digest},{len(data)}")
            body = ("\n".join(lines) + "\n").encode()
            dst.writestr(arcname, data)
        dst.writestr(info, body)
os.replace(tmp, wheel)
PY
mkdir -p "$out"
rm -f "$out"/stagedoor-*.whl
cp "$repaired" "$out/"
auditwheel show "$out/$(basename "$repaired")"
