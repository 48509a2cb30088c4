"""Build of the native extensions: the renderer stagedoor._render (Cython, linked against
zlib), the worker's per-entry fast path stagedoor.worker._entries and the render
handler's durable write stagedoor.tickets._durable (Cython).

`pip install .` builds it in an isolated environment (Cython pinned in pyproject.toml);
`python setup.py build_ext --inplace` builds it next to the sources for development.
Without a C compiler or the zlib headers the build stops with a message saying what to
install, instead of a compiler traceback.

Layout: the extension's source is src/stagedoor/_render.pyx (with its .pxd and .pyi),
which includes its units from src/stagedoor/render/_native/*.pxi and cimports the
declarations of the C libraries it calls from the .pxd files beside them.  A further
extension lives in the subpackage it serves, in the same shape (src/stagedoor/worker/_entries.pyx
with its .pxd and .pyi, including worker/_native/*.pxi), with its sources added to
package-data in pyproject.toml.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup

NEEDS = ("stagedoor needs a C compiler (apt-get install build-essential) "
         "and the zlib and libdeflate headers (zlib1g-dev libdeflate-dev)")


def _check_toolchain() -> None:
    """Compile and link a tiny program that includes zlib.h and libdeflate.h; exit with
    NEEDS if it fails."""
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    if not cc or shutil.which(cc[0]) is None:
        sys.exit(f"error: no C compiler found ({cc[0] if cc else 'CC unset'}): {NEEDS}")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write("#include <zlib.h>\n#include <libdeflate.h>\nint main(void){"
                    "libdeflate_free_compressor(libdeflate_alloc_compressor(1));"
                    "return zlibVersion()[0]=='\\0';}\n")
        try:
            proc = subprocess.run([*cc, src, "-o", os.path.join(tmp, "probe"), "-lz",
                                   "-ldeflate"],
                                  capture_output=True, text=True, timeout=60)
        except OSError as e:
            sys.exit(f"error: cannot run the C compiler {cc[0]} ({e}): {NEEDS}")
        if proc.returncode != 0:
            sys.exit(f"error: compiling against zlib and libdeflate failed:\n"
                     f"{proc.stderr.strip()}\n{NEEDS}")


TEXT_LIBS = ("harfbuzz", "fribidi", "libunibreak", "libthai", "icu-uc")
TEXT_NEEDS = ("stagedoor's renderer shapes text with HarfBuzz, orders it with fribidi, "
              "breaks lines with libunibreak, Thai words with libthai and Lao, Myanmar "
              "and Khmer words with ICU: apt-get install pkg-config libharfbuzz-dev "
              "libfribidi-dev libunibreak-dev libthai-dev libicu-dev "
              "(or run scripts/setup.sh)")


def _pkg_config() -> tuple[list[str], list[str], list[str]]:
    """(include dirs, library dirs, libraries) of TEXT_LIBS; exits with TEXT_NEEDS when
    pkg-config or one of them is missing."""
    if shutil.which("pkg-config") is None:
        sys.exit(f"error: pkg-config not found: {TEXT_NEEDS}")
    missing = [lib for lib in TEXT_LIBS
               if subprocess.run(["pkg-config", "--exists", lib]).returncode != 0]
    if missing:
        sys.exit(f"error: {', '.join(missing)} not found by pkg-config: {TEXT_NEEDS}")
    cflags = subprocess.run(["pkg-config", "--cflags", *TEXT_LIBS], capture_output=True,
                            text=True, check=True).stdout.split()
    libs = subprocess.run(["pkg-config", "--libs", *TEXT_LIBS], capture_output=True,
                          text=True, check=True).stdout.split()
    return ([f[2:] for f in cflags if f.startswith("-I")],
            [f[2:] for f in libs if f.startswith("-L")],
            [f[2:] for f in libs if f.startswith("-l")])


def _extensions() -> list[Extension]:
    from Cython.Build import cythonize

    # _render.pyx includes its units from render/_native/ (paths relative to the .pyx,
    # so the build finds them from a checkout, an sdist or pip's build copy alike) and
    # cimports the C libraries' declarations from there (render/_native/*.pxd);
    # depends makes a change to any of them, or to _render.pxd, rebuild the extension.
    native = "src/stagedoor/render/_native"
    text_inc, text_libdirs, text_libs = _pkg_config() if _building() else ([], [], [])
    ext = Extension(
        "stagedoor._render",
        sources=["src/stagedoor/_render.pyx"],
        depends=["src/stagedoor/_render.pxd", "src/stagedoor/_pthread.pxd",
                 *sorted(os.path.join(native, f) for f in os.listdir(native)
                         if f.endswith((".pxi", ".pxd")))],
        include_dirs=text_inc,
        library_dirs=text_libdirs,
        libraries=["z", "deflate", *text_libs],
        extra_compile_args=["-O2"],
    )
    # The worker's hot path lives in the subpackage it serves, split like _render.pyx:
    # its units in worker/_native/*.pxi, its C declarations in _entries.pxd.
    entries_native = "src/stagedoor/worker/_native"
    entries = Extension("stagedoor.worker._entries",
                        sources=["src/stagedoor/worker/_entries.pyx"],
                        depends=["src/stagedoor/worker/_entries.pxd",
                                 *sorted(os.path.join(entries_native, f)
                                         for f in os.listdir(entries_native)
                                         if f.endswith(".pxi"))],
                        extra_compile_args=["-O2"])
    # The render handler's durable write (one GIL release per file), beside files.py.
    durable = Extension("stagedoor.tickets._durable",
                        sources=["src/stagedoor/tickets/_durable.pyx"],
                        depends=["src/stagedoor/_pthread.pxd"],
                        extra_compile_args=["-O2"])
    # include_path: `cimport stagedoor._pthread` must find src/ in pip's isolated build
    # too, where src/ is not on sys.path as it is in an editable install's venv.
    return cythonize([ext, entries, durable], language_level=3,  # type: ignore[no-any-return]
                     include_path=["src"], compiler_directives={"embedsignature": True})


_BUILD_COMMANDS = {"build_ext", "build", "bdist_wheel", "install", "develop",
                   "editable_wheel", "bdist"}


def _building() -> bool:
    return bool(_BUILD_COMMANDS & set(sys.argv[1:]))


if _building():
    _check_toolchain()

# The docs go under <prefix>/share/doc/stagedoor, the path the systemd unit's
# Documentation= names for the venv docs/supervisor.md installs into.
DOCS = ("share/doc/stagedoor", ["README.md", "RELIABILITY.md", "LICENSE",
                                *sorted(glob.glob("docs/*.md"))])

# the generated C file is a build product, not package data
setup(ext_modules=_extensions(), exclude_package_data={"stagedoor": ["*.c"]},
      data_files=[DOCS])
