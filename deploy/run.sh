#!/usr/bin/env bash
# Decoder Lab for a class: N app processes behind nginx (sticky sessions), one Redis, all on
# this machine. Needs `apt-get install -y nginx redis-server` (no system service is used).
#   deploy/run.sh --apps 4 --port 8080
#   deploy/run.sh --apps 4 --port 80 --host 0.0.0.0 --public-url http://lab.school.example
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
exec "$PY" -m deploy.cluster "$@"
