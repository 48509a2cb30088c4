"""`stagedoor render`: the command line around the renderer."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pypdf
import pytest

import stagedoor
from stagedoor import _render
from stagedoor.cli.main import main
from stagedoor.render import reference as render
from stagedoor.render.order import Order
from tests.support.paths import PACKAGE

DEMO = PACKAGE / "demo" / "order.json"


def test_renders_the_demo_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.pdf"
    assert main(["render", str(DEMO), "-o", str(out)]) == 0
    order = Order.from_json(DEMO.read_bytes())
    assert out.read_bytes() == _render.render_order(order)
    pages = pypdf.PdfReader(io.BytesIO(out.read_bytes())).pages
    assert len(pages) == len(order.tickets) == 3
    assert "Zoë Ødegaard-Šimić" in pages[0].extract_text()
    assert "native renderer" in capsys.readouterr().out
    assert not list(tmp_path.glob(".*.tmp"))


def test_reference_gives_the_same_bytes(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    native, reference = tmp_path / "n.pdf", tmp_path / "r.pdf"
    assert main(["render", str(DEMO), "-o", str(native)]) == 0
    assert main(["render", str(DEMO), "-o", str(reference), "--reference"]) == 0
    assert native.read_bytes() == reference.read_bytes()
    assert "reference renderer" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "message"), [
    (b"{not json", "stagedoor render: order is not JSON: "),
    (b"[]", "stagedoor render: order must be a JSON object\n"),
    (b'{"order_id": 1, "tickets": []}', "stagedoor render: tickets must be a non-empty list\n"),
    (b'{"order_id": 1, "tickets": [{"event": "x"}]}',
     "stagedoor render: tickets[0].venue must be a string\n"),
])
def test_bad_order_data_is_65(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              content: bytes, message: str) -> None:
    src = tmp_path / "order.json"
    src.write_bytes(content)
    out = tmp_path / "out.pdf"
    assert main(["render", str(src), "-o", str(out)]) == 65
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1
    assert not out.exists()


def test_missing_input_is_66(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(tmp_path / "nope.json"), "-o", str(tmp_path / "o.pdf")]) == 66
    err = capsys.readouterr().err
    assert err.startswith("stagedoor render: cannot read ") and err.count("\n") == 1


def test_unwritable_output_is_73(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(DEMO), "-o", str(tmp_path / "no" / "dir" / "o.pdf")]) == 73
    assert capsys.readouterr().err.startswith("stagedoor render: cannot write ")


def test_help_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["render", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: stagedoor render" in out
    for word in ("ORDER.json", "--output", "--reference", "65", "one page per ticket"):
        assert word in out


def test_output_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["render", str(DEMO)])
    assert exit_info.value.code == 2
    assert "--output" in capsys.readouterr().err


def test_stdin_and_the_module_entry_point(tmp_path: Path) -> None:
    out = tmp_path / "stdin.pdf"
    env = {**os.environ, "PYTHONPATH": str(Path(stagedoor.__file__).parent.parent)}
    proc = subprocess.run([sys.executable, "-m", "stagedoor.cli", "render", "-", "-o", str(out)],
                          input=DEMO.read_bytes(), capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert out.read_bytes() == render.render_order(Order.from_json(DEMO.read_bytes()))


def test_check_fonts_lists_every_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--check-fonts"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    for tag in ("Latn", "Grek", "Cyrl", "Arab", "Hebr", "Deva", "Thai", "Hang", "Hani",
                "Hira", "Kana", "Zsye"):
        assert rows[tag][-1] == "ok", out
    assert rows["Cyrl"][0] == "NotoSans-Regular.ttf"
    assert rows["Hani"][0] == "NotoSansCJK-Regular.ttc#2"


def test_check_fonts_names_the_scripts_a_missing_font_leaves_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        # only the configured fonts (render_font_discover 0): nothing else draws Thai
        code = main(["render", "--check-fonts", "--render-font-discover", "0",
                     "--render-fonts", "Thai=NoSuchThai-Regular.ttf", "--render-fonts",
                     "Cyrl=NotoSans-Regular.ttf", "--render-font-fallback", "NotoSans-Regular.ttf",
                     "--render-han-order", "ja"])
    finally:
        from stagedoor.render import fonts
        fonts.use(fonts.plan())
    captured = capsys.readouterr()
    assert code == 69
    rows = {line.split()[0]: line for line in captured.out.splitlines()}
    assert "MISSING" in rows["Thai"] and "ok" in rows["Cyrl"]
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert "NoSuchThai-Regular.ttf" in err[0] and "Thai" in err[0]


def test_check_fonts_checks_every_script_unicode_defines(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every script of Unicode's data gets a row (not a hand-kept sample list): the ones
    that printed as replacement marks before issue 25 are drawn by their Noto faces,
    found from the fonts' own cmaps; scripts no installed font has are named."""
    from stagedoor.render import installed

    assert main(["render", "--check-fonts"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in out[:-1]}
    assert set(rows) >= set(installed.script_samples())
    for tag, face in (("Tibt", "NotoSerifTibetan"), ("Syrc", "NotoSansSyriac"),
                      ("Thaa", "NotoSansThaana"), ("Mong", "NotoSansMongolian"),
                      ("Cher", "NotoSansCherokee"), ("Cans", "NotoSansCanadianAboriginal"),
                      ("Tfng", "NotoSansTifinagh-")):
        assert rows[tag][0].startswith(face) and rows[tag][-1] == "ok", (tag, rows[tag])
    none = [tag for tag, row in rows.items() if row[-1] == "FONT"]
    assert out[-1].endswith("none for: " + (" ".join(none) or "-")), out[-1]


def test_a_configured_font_that_is_missing_is_named_but_an_installed_one_draws(
        capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["render", "--check-fonts", "--render-fonts",
                     "Thai=NoSuchThai-Regular.ttf"])
    finally:
        from stagedoor.render import fonts
        fonts.use(fonts.plan())
    captured = capsys.readouterr()
    assert code == 0
    rows = {line.split()[0]: line for line in captured.out.splitlines()}
    assert "NotoSansThai-Regular.ttf" in rows["Thai"] and rows["Thai"].endswith("ok")
    assert "NoSuchThai-Regular.ttf" in captured.err


def test_a_bad_font_setting_is_exit_78(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--check-fonts", "--render-fonts", "Thai"]) == 78
    assert "KEY=FILE" in capsys.readouterr().err
