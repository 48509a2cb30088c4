#!/usr/bin/env bash
# The main job: a supervisor with 4 workers drains demo orders into ticket PDFs.
# Without STAGEDOOR_REDIS_URL it starts an embedded redis-server under var/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/stagedoor demo --workers "${WORKERS:-4}" "$@"
