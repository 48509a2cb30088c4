#!/usr/bin/env bash
# The repaired wheel as a user gets it (issue 27; scripts/build-wheel.sh makes it):
# installed into a fresh venv outside the repository, its extensions resolve the native
# libraries it vendors (ldd: HarfBuzz, fribidi, libunibreak, libthai, libdeflate, ICU from
# site-packages/stagedoor.libs, nothing "not found"); it renders an Arabic + Thai +
# Devanagari order from outside the repository, byte-identical to the pure-Python
# reference; Thai wraps at words from the wheel's own dictionary on a host without
# /usr/share/libthai (an empty directory mounted over it in a user namespace: the
# same bytes, and different ones when libthai is given no dictionary at all); and
# `stagedoor work --burst` renders a job from a redis-server started here on a free
# loopback port (AOF on); `stagedoor doctor` on that host is OK (exit 0) and names the
# wheel's libraries as the ones the renderer loaded.
#
#   bash scripts/check-wheel.sh WHEEL      (scripts/check-package.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
wheel=$(realpath "${1:?usage: scripts/check-wheel.sh WHEEL}")
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
redis_pid=
cleanup() {
    [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "check-wheel: $*" >&2; exit 1; }

echo "check-wheel: $(basename "$wheel") into a fresh venv"
"$PY" -m venv "$WORK/venv"
# the reference extra: the oracle the native bytes are compared with below
"$WORK/venv/bin/pip" install -q "$wheel[reference]" 2>&1 | grep -v "^WARNING: Location" || true
cd "$WORK"   # from here on, nothing may come from the repository
site=$("$WORK/venv/bin/python" -c 'import stagedoor, os; print(os.path.dirname(os.path.dirname(stagedoor.__file__)))')
[[ $site == "$WORK/venv/"*site-packages ]] || fail "stagedoor imported from $site"

echo "check-wheel: ldd of the extensions"
for ext in "$site"/stagedoor/_render.*.so "$site"/stagedoor/worker/_entries.*.so \
           "$site"/stagedoor/tickets/_durable.*.so; do
    out=$(ldd "$ext")
    if grep -q "not found" <<<"$out"; then fail "$(basename "$ext"): $(grep "not found" <<<"$out")"; fi
    case $ext in *_render.*)
        for lib in harfbuzz fribidi unibreak thai deflate icuuc icudata; do
            line=$(grep -E "^\s*lib$lib-[0-9a-f]{8}\.so" <<<"$out") \
                || fail "_render does not link a vendored lib$lib: $out"
            path=$(realpath "$(awk '{print $3}' <<<"$line")")
            [[ $path == "$site/stagedoor.libs/"* ]] \
                || fail "lib$lib resolves outside the wheel: $line"
            echo "check-wheel:   $(awk '{print $1}' <<<"$line") => ${path#"$site/"}"
        done;;
    esac
done

echo "check-wheel: a non-Latin order rendered from outside the repository"
"$WORK/venv/bin/python" - "$WORK/world.json" "$WORK/thai-wrap.json" <<'PY'
"""An order of Arabic, Thai and Devanagari tickets (the demo script samples shipped in
the package), and one Thai ticket whose small print is too long for one line and has
no space in it: it wraps where libthai's dictionary finds a word boundary."""
import dataclasses
import json
import sys
from importlib import resources

from stagedoor.render.order import Order

samples = resources.files("stagedoor.demo") / "scripts"
tickets = [Order.from_json((samples / f"{s}.json").read_bytes()).tickets[0]
           for s in ("arabic", "thai", "devanagari")]
open(sys.argv[1], "wb").write(Order(order_id=2701, tickets=tuple(tickets)).to_json())
thai = ("ขอบคุณที่ใช้บริการการแสดงคอนเสิร์ตดนตรีคลาสสิกของวงออร์เคสตราแห่งชาติ"
        "ณศูนย์วัฒนธรรมแห่งประเทศไทยกรุงเทพมหานคร")
# the small print: a field that wraps (one-line fields shrink to fit their ink)
order = json.loads(Order(order_id=2702, tickets=(dataclasses.replace(tickets[1],
                                                                    small_print=thai * 3),))
                   .to_json())
open(sys.argv[2], "w").write(json.dumps(order, ensure_ascii=False))
PY
same_as_reference() {  # order.json pdf
    "$WORK/venv/bin/python" - "$1" "$2" <<'PY'
import sys
from pathlib import Path

from stagedoor.render import native_available, reference
from stagedoor.render.order import Order

assert native_available(), "the installed wheel has no native renderer"
order = Order.from_json(Path(sys.argv[1]).read_bytes())
assert Path(sys.argv[2]).read_bytes() == reference.render_order(order), "not byte-identical"
PY
}
"$WORK/venv/bin/stagedoor" render world.json -o world.pdf
same_as_reference world.json world.pdf
text=$(pdftotext world.pdf - | tr -d '\n')
echo "check-wheel:   world.pdf: $(pdfinfo world.pdf | sed -n 's/^Pages: *//p') pages, native ==" \
     "reference, $(wc -c <world.pdf) bytes; pdffonts: $(pdffonts world.pdf | tail -n +3 | wc -l) fonts"
[ -n "$text" ] || fail "pdftotext finds no text in world.pdf"

echo "check-wheel: Thai wraps at words with the wheel's dictionary when the host has none"
"$WORK/venv/bin/stagedoor" render thai-wrap.json -o thai-system.pdf
mkdir "$WORK/empty"
in_host_without_libthai_data() {  # command...: run with an empty /usr/share/libthai
    unshare --map-root-user --mount sh -c \
        'mount --bind "$0" /usr/share/libthai && exec "$@"' "$WORK/empty" "$@"
}
in_host_without_libthai_data "$WORK/venv/bin/stagedoor" render thai-wrap.json -o thai-wheel.pdf
in_host_without_libthai_data env LIBTHAI_DICTDIR=/nonexistent \
    "$WORK/venv/bin/stagedoor" render thai-wrap.json -o thai-none.pdf
cmp -s thai-system.pdf thai-wheel.pdf \
    || fail "Thai with the wheel's dictionary differs from the system dictionary's"
! cmp -s thai-system.pdf thai-none.pdf \
    || fail "Thai without any dictionary wraps the same: the check above proves nothing"
same_as_reference thai-wrap.json thai-system.pdf
echo "check-wheel:   the same PDF as with libthai-data; without any dictionary a different one"

echo "check-wheel: stagedoor work --burst against a redis-server on a free loopback port"
port=$("$WORK/venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes \
    --dir "$WORK" --logfile "$WORK/redis.log" &
redis_pid=$!
export STAGEDOOR_REDIS_URL="redis://127.0.0.1:$port/0" STAGEDOOR_TICKETS_DIR="$WORK/tickets"
"$WORK/venv/bin/python" - "$WORK/world.json" <<'PY'
"""The api's side: the order in the store, then its job on the stream."""
import sys
import time
from pathlib import Path

import redis

from stagedoor import config, enqueue_sync, make_job, sync_client
from stagedoor.tickets.orders import put_orders_sync
from stagedoor.render.order import Order

settings = config.load()  # STAGEDOOR_REDIS_URL, STAGEDOOR_TICKETS_DIR
client = sync_client(settings)
for _ in range(100):  # the server was just started
    try:
        client.ping()
        break
    except redis.ConnectionError:
        time.sleep(0.1)
order = Order.from_json(Path(sys.argv[1]).read_bytes())
put_orders_sync(client, settings, [order])
enqueue_sync(client, settings, [make_job("render_tickets", order.order_id, 2701)])
PY
"$WORK/venv/bin/stagedoor" work --burst --log-format json >"$WORK/work.log" 2>&1 \
    || { cat "$WORK/work.log"; fail "stagedoor work --burst failed"; }
pdf=$(ls "$WORK"/tickets/*2701*.pdf 2>/dev/null) || { cat "$WORK/work.log"; fail "no PDF rendered"; }
cmp -s "$pdf" world.pdf || fail "the worker's PDF differs from stagedoor render's"
echo "check-wheel:   the worker rendered $(basename "$pdf"), the same bytes as stagedoor render"

echo "check-wheel: stagedoor doctor on this host"
mkdir "$WORK/units"
"$WORK/venv/bin/stagedoor" doctor --unit-dir "$WORK/units" >"$WORK/doctor.txt" \
    || { cat "$WORK/doctor.txt"; fail "stagedoor doctor is not OK"; }
grep -q "^OK       native renderer: .*libharfbuzz-[0-9a-f]*\.so[.0-9]* (the wheel)" "$WORK/doctor.txt" \
    || { cat "$WORK/doctor.txt"; fail "doctor does not see the wheel's HarfBuzz"; }
echo "check-wheel:   $(head -1 "$WORK/doctor.txt")"
echo "check-wheel: ok"
