#!/usr/bin/env bash
# One GPU lease, as one command per stage (docs/speed.md, "Running the GPU suite"):
#   measure: issue 43's measuring call, first on any lease (benchmarks/gpu_measure.py: the
#          population profile at 72 members, the stacked CNN at fp32/tf32/bf16 eager and as CUDA
#          graphs with their bit checks, the compiled env step captured at 1,152 and 4,608 envs,
#          the speed rows at 18 and 72 members; about 5 minutes on an H100, each section under
#          its own deadline), stopped by MEASURE_SECONDS (default 420);
#   quick: the GPU suite's engine, vector env, PPO and conformance sections, stopped by
#          QUICK_SECONDS (default 300);
#   train: the suite's training run, stopped by TRAIN_SECONDS (default 300);
#   table1: population training speed, then the Table 1 grid trained as one population per
#          task and benchmarked (benchmarks/gpu_table1.py), sized to end by TABLE1_SECONDS
#          (default 480);
#   profile: where a population's time goes (benchmarks/population_profile.py, 72 members,
#          every batching kept), into $OUT/population_profile.txt;
#   results: the paper's protocol (benchmarks/gpu_results.py): Table 2's 18 runs, then Table 1's
#          72, each 6M steps, trained as populations in /tmp/paper_results, stopped gracefully
#          by RESULTS_SECONDS (default 540; the runs save) so that the same command on the same
#          warm machine continues them; its report, tables and runs' files into $OUT or
#          outputs/gpu_results;
#   all:   quick, train and table1, one after the other.
# Options after the stage go to its program (gpu_measure.py, gpu_suite.py, gpu_table1.py,
# population_profile.py, gpu_results.py; for all, --device and --tiny to each); each takes
# --device (default cuda where there is one) and --tiny (CI runs every stage so on a CPU:
# --device cpu --tiny).
# A device this machine lacks or a precision it cannot run is refused in one line before
# anything runs. The wheels (.whl/, benchmarks/gpu_wheels.sh) are installed into /tmp/site
# once a machine: a later stage on the same warm machine finds them there.
# Reports go to $OUT (the device tool's folder that comes back) or outputs/gpu_lease, each
# rewritten after every section, so a crash or a kill still returns what ran.
# usage: benchmarks/gpu_lease.sh measure|quick|train|table1|profile|results|all [options]
set -uo pipefail
stage=${1:?usage: gpu_lease.sh measure|quick|train|table1|profile|results|all [options]}
shift
case $stage in measure|quick|train|table1|profile|results|all) ;;
    *) echo "gpu_lease.sh: unknown stage '$stage' (measure, quick, train, table1, profile, results, all)" >&2
       exit 2;;
esac
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=${OUT:-outputs/gpu_lease}
[ "$stage" = results ] && out=${OUT:-outputs/gpu_results}
# The GPU image has torch, NumPy and Numba; the rest travels as wheels (benchmarks/gpu_wheels.sh).
site=/tmp/site
needs="import gymnasium, stable_baselines3, hydra"
if ! "$python" -c "$needs" 2>/dev/null; then
    if PYTHONPATH=$site "$python" -c "$needs" 2>/dev/null; then
        echo "gpu_lease.sh: the wheels are in $site already (an earlier stage on this machine)"
    else
        [ -d .whl ] || { echo "gpu_lease.sh: gymnasium, SB3 or Hydra missing and no .whl/" >&2; exit 2; }
        begun=$SECONDS
        "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$site" .whl/*.whl || exit 2
        echo "gpu_lease.sh: wheels installed into $site in $((SECONDS - begun)) s"
    fi
    export PYTHONPATH=$site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1
# the device and precisions, checked as a training run checks them, before anything runs
"$python" benchmarks/precision.py "$@" || exit 2
mkdir -p "$out"
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
if [ "$stage" = measure ]; then
    timeout -k 10 "${MEASURE_SECONDS:-420}" "$python" benchmarks/gpu_measure.py --out "$out" "$@" \
        || status=1
fi
if [ "$stage" = results ]; then
    "$python" benchmarks/gpu_results.py --seconds "${RESULTS_SECONDS:-540}" --out "$out" "$@" \
        || status=1
fi
if [ "$stage" = profile ]; then
    "$python" benchmarks/population_profile.py --out "$out/population_profile.txt" "$@" || status=1
fi
exit $status
