#!/usr/bin/env bash
# Build the documentation site into docs/_build/html (or $RLX_DOCS_OUT/html), every warning an
# error: a missing docstring, a broken reference, link or anchor, an agent without a paper, a
# hyperparameter without a meaning. The generated pages (agents, API, benchmarks, reference)
# are rewritten each time. `bash scripts/docs.sh serve` then serves it on localhost:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
out=${RLX_DOCS_OUT:-docs/_build}
if [ "${1:-}" = "serve" ]; then
  exec "$python" -m http.server --directory "$out/html" "${2:-8000}"
fi
start=$SECONDS
"$python" -m sphinx -W -n --keep-going -q -b html -d "$out/doctrees" docs "$out/html"
echo "docs: built $out/html in $((SECONDS - start)) s: no warnings, every internal link resolves" >&2
