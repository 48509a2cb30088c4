"""One typed settings object, read from defaults < TOML file < STAGEDOOR_* env < flags.

Every number in the seed ("The Queue and the Worker") is a default here and nowhere
else, so an operator can change any of them and the code cannot drift from the
spec.  Each field carries its own help text and bounds; the CLI flags, the
environment names and the TOML keys are all derived from the field name, so there
is exactly one list of knobs.

A bad value raises ConfigError with one line naming the source, the key and what
was expected; the CLI turns that into exit code 78 (EX_CONFIG, sysexits.h), which
the systemd unit lists in RestartPreventExitStatus.

    settings.py   Settings (the fields, their defaults and bounds) and its checks
    urls.py       the Redis URL checks, and the parts of a Sentinel or Cluster URL
    load.py       from_toml, from_env, load, the flags (add_arguments, from_args), and
                  docs/settings.md's table (`python -m stagedoor.config` prints it)
"""

from ..errors import ConfigError
from .load import ENV_PREFIX, add_arguments, from_args, from_env, from_toml, load, markdown_table
from .settings import (
    EMOJI_FONTS,
    FALLBACK_FONTS,
    FONT_DIRS,
    HAN_FONTS,
    HAN_ORDER,
    LANG_FONTS,
    SCRIPT_FONTS,
    Settings,
)
from .urls import redact_url

__all__ = ["EMOJI_FONTS", "ENV_PREFIX", "FALLBACK_FONTS", "FONT_DIRS", "HAN_FONTS", "HAN_ORDER",
           "LANG_FONTS", "SCRIPT_FONTS", "ConfigError", "Settings", "add_arguments",
           "from_args", "from_env", "from_toml", "load", "markdown_table", "redact_url"]
