#!/usr/bin/env bash
# Idempotent set-up on Debian/Ubuntu with Python >= 3.11: system packages the product
# and its tests need (redis-server, qpdf, poppler-utils, a C compiler, zlib, libdeflate, HarfBuzz,
# fribidi, libunibreak, libthai and ICU headers, Noto and Symbola fonts, tesseract, prometheus
# and promtool, chromium and chromium-driver for the console's browser tests), then .venv
# with stagedoor installed in editable mode (this builds the Cython renderer).  Fast when
# everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v qpdf >/dev/null || need_apt+=(qpdf)
command -v pdftoppm >/dev/null || need_apt+=(poppler-utils)
command -v systemd-analyze >/dev/null || need_apt+=(systemd)  # the unit file test
command -v openssl >/dev/null || need_apt+=(openssl)       # TLS test certificates
command -v ps >/dev/null || need_apt+=(procps)             # the password-not-in-ps test
command -v strace >/dev/null || need_apt+=(strace)          # the fsync -> rename -> dir fsync -> ack order test
command -v cc >/dev/null || need_apt+=(build-essential)
# the web console's browser tests (tests/web/test_web_browser.py): headless Chromium + its driver
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
[ -e /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
# the PDF page streams' deflate (render/_native/pdf.pxi)
[ -e /usr/include/libdeflate.h ] || need_apt+=(libdeflate-dev)
# the renderer's text stack (shaping, bidi, line breaks) is linked from C: headers + pkg-config
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
[ -e /usr/include/harfbuzz/hb.h ] || need_apt+=(libharfbuzz-dev)
[ -e /usr/include/fribidi/fribidi.h ] || need_apt+=(libfribidi-dev)
[ -e /usr/include/linebreak.h ] || need_apt+=(libunibreak-dev)
# Thai word breaks: libthai's dictionary segmenter and its dictionary
[ -e /usr/include/thai/thbrk.h ] || need_apt+=(libthai-dev)
[ -e /usr/share/libthai/thbrk.tri ] || need_apt+=(libthai-data)
# Lao, Myanmar and Khmer word breaks: ICU's line break iterator (its dictionaries are
# compiled into libicudata, which libicu-dev pulls in)
[ -e /usr/include/unicode/ubrk.h ] || need_apt+=(libicu-dev)
# the fonts the default settings name (docs/settings.md, render_font_*): Noto for the
# scripts, Noto CJK for Han/kana/Hangul, Symbola for monochrome emoji and symbols
[ -e /usr/share/fonts/truetype/noto/NotoSans-Regular.ttf ] || need_apt+=(fonts-noto-core)
[ -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || need_apt+=(fonts-noto-cjk)
[ -e /usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf ] || need_apt+=(fonts-symbola)
[ -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] || need_apt+=(fonts-noto-color-emoji)  # emoji in colour
# OCR of rendered tickets in tests/render/test_scripts.py: tesseract and one model per script
command -v tesseract >/dev/null || need_apt+=(tesseract-ocr)
for lang in rus ell ara heb chi-sim chi-tra jpn kor hin tha vie; do
    compgen -G "/usr/share/tesseract-ocr/*/tessdata/${lang//-/_}.traineddata" >/dev/null \
        || need_apt+=("tesseract-ocr-$lang")
done
if ! "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    echo "setup: $PYTHON is missing or older than 3.11; set PYTHON=/path/to/python3.11+" >&2
    exit 1
fi
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
"$PYTHON" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || need_apt+=(python3-dev)
# promtool and the server: the shipped alert rules and dashboard are tested with them.
# Without recommends: the node exporter and its collectors are of no use here.
need_norec=()
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } \
    || need_norec+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ] || [ ${#need_norec[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]} ${need_norec[*]} with apt-get" >&2
    $SUDO apt-get update -qq
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if [ ${#need_norec[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${need_norec[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.stagedoor-installed
# rebuild when the build or any source of the extensions (.pyx, .pxd, the .pxi units:
# the renderer, worker/_entries, tickets/_durable) changed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
   || [ -n "$(find src/stagedoor \( -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' \) \
                   -newer "$stamp")" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[test,bench,dev]'
    touch "$stamp"
fi
.venv/bin/python -c 'import stagedoor._render, stagedoor.worker._entries, stagedoor.tickets._durable' \
    2>/dev/null || {
    echo "setup: the native extensions did not build; see the pip output above" >&2; exit 1; }
# Byte-compile the tree once: an editable install writes no bytecode, and where
# PYTHONDONTWRITEBYTECODE is set every process the tests and the demo start (a worker,
# a render process, each CLI call) would compile ~150 modules again (~30-40 ms each).
.venv/bin/python -m compileall -q src bench tests >/dev/null
