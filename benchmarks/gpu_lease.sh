#!/usr/bin/env bash
# One GPU lease, as one command per stage (docs/speed.md, "Running the GPU suite"):
#   quick: the wheels' install, then the GPU suite's engine, vector env, PPO and conformance
#          sections, stopped by QUICK_SECONDS (default 300);
#   train: the suite's training run, stopped by TRAIN_SECONDS (default 300);
#   all:   both, one after the other.
# Reports go to $OUT (the device tool's folder that comes back) or outputs/gpu_lease, each
# rewritten after every section, so a crash or a kill still returns what ran.
# usage: benchmarks/gpu_lease.sh quick|train|all [gpu_suite.py options, e.g. --tiny]
set -uo pipefail
stage=${1:?usage: gpu_lease.sh quick|train|all [gpu_suite.py options]}
shift
case $stage in quick|train|all) ;; *) echo "gpu_lease.sh: unknown stage '$stage'" >&2; exit 2;; esac
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=${OUT:-outputs/gpu_lease}
mkdir -p "$out"
# The GPU image has torch, NumPy and Numba; the rest travels as wheels (benchmarks/gpu_wheels.sh).
if ! "$python" -c "import gymnasium, stable_baselines3, hydra" 2>/dev/null; then
    [ -d .whl ] || { echo "gpu_lease.sh: gymnasium, SB3 or Hydra missing and no .whl/" >&2; exit 2; }
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 2
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1
status=0
if [ "$stage" != train ]; then
    "$python" benchmarks/gpu_suite.py --sections conformance ppo vector engine \
        --deadline "${QUICK_SECONDS:-300}" --out "$out/quick.md" "$@" || status=1
fi
if [ "$stage" != quick ]; then
    "$python" benchmarks/gpu_suite.py --sections training \
        --deadline "${TRAIN_SECONDS:-300}" --out "$out/train.md" "$@" || status=1
fi
exit $status
