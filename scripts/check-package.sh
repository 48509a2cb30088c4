#!/usr/bin/env bash
# Packaging check (issue 10): the sdist and the wheel (built from the sdist, as pip
# does) carry the extension's sources where they live (_render.pyx/.pxd/.pyi and
# render/_native/*.pxi) and build it; the wheel, and a non-editable `pip install .`,
# each into a fresh venv outside the repository, import and render the demo order
# from outside the repository, byte-identical to the pure-Python reference.  The
# installed package prints its systemd units pointed at itself (ExecStart= and
# Documentation= exist; systemd-analyze verify is clean), and the test suite runs from
# the unpacked sdist against the installed wheel with its `test` extra (issue 15).
# The wheel is then repaired into a manylinux one with its native libraries vendored
# (scripts/build-wheel.sh) and checked as a user gets it (scripts/check-wheel.sh).
# Takes a few minutes (the extension is compiled twice).  Needs .venv (setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=${PYTHON:-python3}

echo "check-package: sdist and wheel into $WORK/dist"
.venv/bin/python -m build --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log"; exit 1; }
sdist=$(ls "$WORK"/dist/*.tar.gz)
wheel=$(ls "$WORK"/dist/*.whl)
sources="_render.pyx _render.pxd _render.pyi _pthread.pxd worker/_entries.pyx worker/_entries.pyi
         worker/_entries.pxd tickets/_durable.pyx
         $(cd src/stagedoor && ls render/_native/*.pxi render/_native/*.pxd worker/_native/*.pxi)"
in_sdist=$(tar tzf "$sdist")
in_wheel=$("$PY" -m zipfile -l "$wheel")
for f in $sources; do
    grep -qx "stagedoor-[^/]*/src/stagedoor/$f" <<<"$in_sdist" \
        || { echo "check-package: $f missing from the sdist" >&2; exit 1; }
    grep -q "^stagedoor/$f " <<<"$in_wheel" \
        || { echo "check-package: $f missing from the wheel" >&2; exit 1; }
done
echo "check-package: the sdist and the wheel carry $(wc -w <<<"$sources") extension sources"

render_from_outside() {  # venv name
    local venv="$WORK/$1"
    (cd "$WORK" && "$venv/bin/stagedoor" render "$REPO/src/stagedoor/demo/order.json" \
        -o "$WORK/$1.pdf")
    (cd "$WORK" && "$venv/bin/python" - "$REPO/src/stagedoor/demo/order.json" "$WORK/$1.pdf" <<'PY'
import sys
from pathlib import Path

import stagedoor
from stagedoor.render import native_available, reference
from stagedoor.render.order import Order

assert "site-packages" in stagedoor.__file__, stagedoor.__file__
assert native_available(), "the installed package has no native renderer"
order = Order.from_json(Path(sys.argv[1]).read_bytes())
assert Path(sys.argv[2]).read_bytes() == reference.render_order(order), "not byte-identical"
print(f"check-package: {stagedoor.__file__}: renders, native, identical to the reference")
PY
    )
}

echo "check-package: the wheel into a fresh venv"
"$PY" -m venv "$WORK/from-wheel"
"$WORK/from-wheel/bin/pip" install -q "$wheel" 2>&1 | grep -v "^WARNING: Location" || true
render_from_outside from-wheel

echo "check-package: the installed package's systemd units point at it"
for unit in stagedoor.service stagedoor@.service; do
    name=$unit; [ "$unit" = stagedoor@.service ] && name=stagedoor@jobs.service
    (cd "$WORK" && "$WORK/from-wheel/bin/stagedoor" systemd print "$unit" >"$WORK/$name")
    exe=$(sed -n 's/^ExecStart=//p' "$WORK/$name")
    doc=$(sed -n 's#^Documentation=file://##p' "$WORK/$name")
    [ "$exe" = "$WORK/from-wheel/bin/stagedoor-supervise" ] && [ -x "$exe" ] \
        || { echo "check-package: $unit: ExecStart=$exe is not the venv's" >&2; exit 1; }
    [ -f "$doc" ] || { echo "check-package: $unit: Documentation=$doc missing" >&2; exit 1; }
    out=$(systemd-analyze verify "$WORK/$name" 2>&1 | grep -F "$name" || true)
    [ -z "$out" ] || { echo "check-package: systemd-analyze verify $name: $out" >&2; exit 1; }
done
echo "check-package: both units verify, ExecStart= and Documentation= exist"

echo "check-package: the tests from the unpacked sdist, against the installed wheel"
"$WORK/from-wheel/bin/pip" install -q "$wheel[test]" 2>&1 | grep -v "^WARNING: Location" || true
tar xzf "$sdist" -C "$WORK"
tree=$(ls -d "$WORK"/stagedoor-*/)
(cd "$tree" && "$WORK/from-wheel/bin/python" -m pytest -q -p no:cacheprovider --collect-only \
    >"$WORK/collect.log" 2>&1) || { tail -20 "$WORK/collect.log"; exit 1; }
(cd "$tree" && "$WORK/from-wheel/bin/python" -m pytest -q -p no:cacheprovider -x \
    tests/stream/test_job.py tests/config/test_config.py tests/telemetry/test_logs.py tests/telemetry/test_monitoring.py \
    tests/supervisor/test_systemd.py tests/cli/test_cli.py tests/render/test_render.py 2>&1 | tail -3)
echo "check-package: $(tail -1 "$WORK/collect.log") from the sdist"

echo "check-package: the repaired wheel (auditwheel, native libraries vendored)"
bash scripts/build-wheel.sh "$WORK/wheelhouse" "$wheel" | grep -E "^build-wheel|platform tag"
bash scripts/check-wheel.sh "$WORK"/wheelhouse/*.whl

echo "check-package: pip install . (not editable) into a fresh venv"
"$PY" -m venv "$WORK/from-tree"
"$WORK/from-tree/bin/pip" install -q . 2>&1 | grep -v "^WARNING: Location" || true
render_from_outside from-tree
echo "check-package: ok"
