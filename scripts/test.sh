#!/usr/bin/env bash
# The test suite: unit, integration and fault tests against redis-servers the suite
# starts itself on free loopback ports (never the machine's own Redis).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest tests "$@"
