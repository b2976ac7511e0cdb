#!/usr/bin/env bash
# One GPU lease, as one command per stage (docs/speed.md, "Running the GPU suite"):
#   quick: the wheels' install, then the GPU suite's engine, vector env, PPO and conformance
#          sections, stopped by QUICK_SECONDS (default 300);
#   train: the suite's training run, stopped by TRAIN_SECONDS (default 300);
#   table1: population training speed, then the Table 1 grid trained as one population per
#          task and benchmarked (benchmarks/gpu_table1.py), sized to end by TABLE1_SECONDS
#          (default 480);
#   profile: where a population's time goes (benchmarks/population_profile.py, 72 members by
#          default; its options after the stage), into $OUT/population_profile.txt;
#   all:   quick, train and table1, one after the other.
# Reports go to $OUT (the device tool's folder that comes back) or outputs/gpu_lease, each
# rewritten after every section, so a crash or a kill still returns what ran.
# usage: benchmarks/gpu_lease.sh quick|train|table1|profile|all [options of gpu_suite.py, of
#        gpu_table1.py for table1 alone, of population_profile.py for profile; --tiny for all]
set -uo pipefail
stage=${1:?usage: gpu_lease.sh quick|train|table1|profile|all [options]}
shift
case $stage in quick|train|table1|profile|all) ;; *) echo "gpu_lease.sh: unknown stage '$stage'" >&2; exit 2;; esac
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
if [ "$stage" = quick ] || [ "$stage" = all ]; then
    "$python" benchmarks/gpu_suite.py --sections conformance ppo vector engine \
        --deadline "${QUICK_SECONDS:-300}" --out "$out/quick.md" "$@" || status=1
fi
if [ "$stage" = train ] || [ "$stage" = all ]; then
    "$python" benchmarks/gpu_suite.py --sections training \
        --deadline "${TRAIN_SECONDS:-300}" --out "$out/train.md" "$@" || status=1
fi
if [ "$stage" = table1 ] || [ "$stage" = all ]; then
    table1_args=("$@")
    if [ "$stage" = all ]; then  # of the suite's options, the two that gpu_table1.py takes
        table1_args=()
        while [ $# -gt 0 ]; do
            case $1 in --tiny) table1_args+=(--tiny);; --device) table1_args+=(--device "$2"); shift;; esac
            shift
        done
    fi
    OUT="$out" "$python" benchmarks/gpu_table1.py --seconds "${TABLE1_SECONDS:-480}" \
        "${table1_args[@]}" || status=1
fi
if [ "$stage" = profile ]; then
    "$python" benchmarks/population_profile.py --out "$out/population_profile.txt" \
        --batching vmap unfold "$@" \
        device=cuda || status=1
fi
exit $status
