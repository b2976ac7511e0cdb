#!/usr/bin/env bash
# Download into .whl/ the wheels that the GPU machine's image lacks (its Python 3.12.3 has torch,
# NumPy, Numba, SciPy, pandas, statsmodels, seaborn, absl-py, joblib, Matplotlib, TensorBoard,
# imageio, PyYAML, cloudpickle and pytest), at this project's versions (.venv's pip freeze), and
# check that they and the working tree fit the 64 MiB a device call carries. Run here, in the
# repository root; then carry .whl (docs/speed.md). On the GPU machine:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
set -euo pipefail
cd "$(dirname "$0")/.."
pip=${VENV_PIP:-.venv/bin/pip}
# in a git worktree, the main checkout's .venv
[ -x "$pip" ] || pip=$(git rev-parse --path-format=absolute --git-common-dir)/../.venv/bin/pip
freeze=$("$pip" freeze)
# The image's own packages are not carried (a second copy would shadow them), but for pandas:
# the image's 3.0 breaks arch 7.2 (rliable's bootstrap, the reproduction's intervals; found on
# the second lease), so a pandas 2 (the newest with a CPython 3.12 wheel) and its needs travel.
# The rest are the runtime needs the image lacks (pyproject's dependencies and their own
# needs; pyemd 1.1 needs POT).
packages="gymnasium farama-notifications stable-baselines3 sb3-contrib hydra-core omegaconf
antlr4-python3-runtime hydra-joblib-launcher hydra-submitit-launcher submitit pettingzoo
pyemd pot rliable arch array-api-compat"
shadowing="pandas<3 pytz tzdata"
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's too
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
rm -rf .whl && mkdir .whl  # no stale wheel: two versions of one package stop the install
for name in $packages; do
    pin=$(grep -i "^${name//-/[-_]}==" <<<"$freeze" || true)
    [ -n "$pin" ] || { echo "gpu_wheels.sh: $name is not installed in .venv" >&2; exit 1; }
    if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$pin" \
        2>/tmp/gpu_wheels.log; then
        # no wheel on PyPI (antlr4-python3-runtime 4.9.3 and rliable 1.2.0 are pure-Python
        # sdists): build one; the check below stops a wheel built for this machine's Python
        python3 -m pip wheel -q --no-deps -w .whl "$pin" 2>>/tmp/gpu_wheels.log \
        || { grep -v 'is ignored' /tmp/gpu_wheels.log >&2; exit 1; }
    fi
done
for spec in $shadowing; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "$spec" 2>/tmp/gpu_wheels.log \
    || { grep -v 'is ignored' /tmp/gpu_wheels.log >&2; exit 1; }
done
if ls .whl | grep -v -e '-none-any\.whl$' -e '-cp312-.*manylinux.*x86_64\.whl$'; then
    echo "gpu_wheels.sh: a wheel above is neither pure Python nor for CPython 3.12" >&2; exit 1
fi
sum() { xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}'; }  # deleted: skipped
wheels=$(find .whl -type f -print0 | sum)
tree=$(git ls-files -z -co --exclude-standard | sum)
ls -s --block-size=K .whl
echo "wheels $((wheels / 1024)) KiB + working tree $((tree / 1024)) KiB" \
    "= $(((wheels + tree) / 1024)) KiB travel (limit 60 MiB here, 64 MiB a call)"
if [ $((wheels + tree)) -gt $((60 * 1024 * 1024)) ]; then
    echo "gpu_wheels.sh: more than 60 MiB would travel" >&2; exit 1
fi
