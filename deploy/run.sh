#!/usr/bin/env bash
# Decoder Lab for a class: N app processes behind nginx (sticky sessions), one Redis (classes in
# an append-only file), all on this machine under supervisord, which restarts any that dies.
# Needs `apt-get install -y nginx redis-server` (no system service is used) and the venv from
# ./lab install (supervisor is in requirements.txt). Ctrl-C stops everything.
#   deploy/run.sh --apps 4 --port 8080
#   deploy/run.sh --apps 4 --port 80 --host 0.0.0.0 --public-url http://lab.school.example [--run-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
exec "$PY" -m deploy.cluster "$@"
