"""Settings: the seed's numbers are the defaults, and every source can change them."""

from __future__ import annotations

from pathlib import Path

import pytest

from stagedoor import config
from stagedoor.config import ConfigError, Settings
from tests.support.cli import cli


def test_defaults_are_the_seeds_numbers() -> None:
    s = Settings()
    assert (s.stream, s.group, s.dead_stream) == ("jobs", "workers", "jobs:dead")
    assert (s.count, s.block_ms, s.concurrency) == (10, 5000, 8)
    assert s.socket_timeout == 0.1
    assert (s.claim_idle_ms, s.reclaim_interval, s.reclaim_count) == (60_000, 30.0, 10)
    assert (s.maxlen, s.dead_maxlen, s.max_deliveries) == (100_000, 10_000, 5)
    assert s.read_socket_timeout > s.block_ms / 1000


def test_precedence_defaults_toml_env_flags(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('count = 20\nblock_ms = 100\nstream = "from-toml"\n')
    env = {"STAGEDOOR_COUNT": "30", "STAGEDOOR_CONFIG": str(toml)}
    s = config.load({"block_ms": "250"}, environ=env)
    assert s.count == 30          # env beats TOML
    assert s.block_ms == 250      # flag beats TOML
    assert s.stream == "from-toml"
    assert s.concurrency == 8     # default where nobody spoke


def test_stagedoor_table_in_toml(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('[stagedoor]\nhandlers = ["a.b:c"]\nconcurrency = 3\n')
    s = config.load(config_file=str(toml), environ={})
    assert s.handlers == ["a.b:c"] and s.concurrency == 3


@pytest.mark.parametrize(("env", "message"), [
    ({"STAGEDOOR_COUNT": "ten"}, "count='ten': expected an integer"),
    ({"STAGEDOOR_COUNT": "0"}, "count=0: must be at least 1"),
    ({"STAGEDOOR_SOCKET_TIMEOUT": "fast"}, "expected a number"),
    ({"STAGEDOOR_REDIS_URL": "http://x"}, "scheme must be one of"),
    ({"STAGEDOOR_JOB_TIMEOUT": "90"}, "must be below claim_idle_ms"),
    ({"STAGEDOOR_NOPE": "1"}, "unknown variable STAGEDOOR_NOPE"),
    ({"STAGEDOOR_HANDLERS": "nocolon"}, "is not module:attr"),
])
def test_bad_values_name_the_key(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        config.load(environ=env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_toml_key(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text("cuont = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'cuont'"):
        config.load(config_file=str(toml), environ={})


def test_password_is_redacted_in_errors() -> None:
    with pytest.raises(ConfigError) as info:
        config.load(environ={"STAGEDOOR_REDIS_URL": "http://u:s3cret@h/0"})
    assert "s3cret" not in str(info.value)


def test_cli_bad_value_is_one_line_and_exit_78() -> None:
    r = cli("enqueue", "--kind", "noop", "--order-id", "1", "--outbox-id", "1",
            env={"STAGEDOOR_MAXLEN": "-5"})
    assert r.returncode == 78
    assert r.stderr.strip().count("\n") == 0
    assert "maxlen=-5: must be at least 1" in r.stderr


def test_cli_bad_flag_is_exit_2_one_line() -> None:
    r = cli("enqueue", "--no-such-flag")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "unrecognized arguments: --no-such-flag" in r.stderr


def test_every_setting_has_a_flag_in_help() -> None:
    r = cli("work", "--help")
    assert r.returncode == 0
    for name in ("--block-ms", "--claim-idle-ms", "--max-deliveries", "--dead-maxlen"):
        assert name in r.stdout


def test_settings_doc_is_current() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "settings.md").read_text()
    assert config.markdown_table() in doc, "regenerate: python -m stagedoor.config"
