#!/usr/bin/env bash
# Create .venv (if missing) and install every rlx distribution of this repository in editable mode.
# torch==2.13.0 (the CPU wheel on this machine's disk) is installed first once a package needs torch.
set -euo pipefail
cd "$(dirname "$0")/.."

# A line per step on stderr: pip is quiet for minutes, and CI logs keep the lines.
step() { echo "setup: $*" >&2; }

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  step "creating .venv"
  "$python" -m venv .venv
else
  step "using the existing .venv"
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)

if grep -qs '"torch' packages/*/pyproject.toml; then
  step "installing torch 2.13.0 (CPU wheel)"
  "${pip[@]}" install torch==2.13.0
fi

# Extras that the test suite needs: core's loggers and trackers, plots, videos, tuning and statistics, the ES family's Ray backend.
extras() {
  case "$1" in
    packages/core) echo "[tensorboard,plot,video,tune,mlflow,wandb,stats,ray]" ;;
    packages/es) echo "[ray]" ;;
    packages/envs) echo "[atari]" ;;
    *) echo "" ;;
  esac
}

editable=()
seen=" "
for package in packages/core packages/*/ examples/*/; do
  package=${package%/}
  [ -f "$package/pyproject.toml" ] || continue
  case "$seen" in *" $package "*) continue ;; esac
  seen="$seen$package "
  editable+=(-e "$package$(extras "$package")")
done
step "installing the $((${#editable[@]} / 2)) rlx distributions (editable), the test tools and the docs tools ..."
"${pip[@]}" install "${editable[@]}" pytest pytest-xdist hypothesis ruff mypy "sphinx>=8" "myst-parser>=4" "furo>=2024.8"
step "done in ${SECONDS} s"
