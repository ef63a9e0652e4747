#!/usr/bin/env bash
# Build the documentation site into docs/_build/html, every warning an error: a missing
# docstring, a broken reference or link, an agent without a paper, a hyperparameter without
# a meaning. The generated pages (agents, API, benchmarks, reference) are rewritten each time.
# `bash scripts/docs.sh serve` then serves the site on http://localhost:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
if [ "${1:-}" = "serve" ]; then
  exec "$python" -m http.server --directory docs/_build/html "${2:-8000}"
fi
start=$SECONDS
"$python" -m sphinx -W -n --keep-going -q -b html -d docs/_build/doctrees docs docs/_build/html "$@"
echo "docs: built docs/_build/html in $((SECONDS - start)) s, no warnings, every internal link resolves" >&2
