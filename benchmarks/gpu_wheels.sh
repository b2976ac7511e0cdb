#!/usr/bin/env bash
# Download into .whl/ the wheels that the GPU machine's image lacks (its Python 3.12 has torch,
# NumPy, Numba, SciPy, pandas, statsmodels, Matplotlib, TensorBoard, imageio and pytest), at
# this project's versions, and check that they and the working tree fit the 64 MiB a device
# call carries. Run here, in the repository root; then carry .whl (docs/speed.md).
set -euo pipefail
cd "$(dirname "$0")/.."
pip=${PIP:-.venv/bin/pip}
# the image's own packages are never carried: a second copy would shadow them
packages="gymnasium farama-notifications stable-baselines3 sb3-contrib hydra-core omegaconf
antlr4-python3-runtime hydra-joblib-launcher hydra-submitit-launcher submitit pettingzoo
pyemd pot rliable arch array-api-compat"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir .whl
for name in $packages; do
    pin=$("$pip" freeze | grep -i "^${name//-/[-_]}==" || true)
    [ -n "$pin" ] || { echo "gpu_wheels.sh: $name is not installed here" >&2; exit 1; }
    "$pip" download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d .whl "$pin" 2>/dev/null \
    || "$pip" wheel -q --no-deps -w .whl "$pin"  # a pure-Python sdist (antlr4 4.9.3)
done
if ls .whl | grep -v -e '-none-any.whl$' -e 'cp312' ; then
    echo "gpu_wheels.sh: a wheel above is neither pure Python nor for CPython 3.12" >&2; exit 1
fi
wheels=$(du -sb .whl | cut -f1)
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
ls -s --block-size=K .whl
echo "wheels $((wheels / 1024)) KiB + working tree $((tree / 1024)) KiB"
if [ $((wheels + tree)) -gt $((60 * 1024 * 1024)) ]; then
    echo "gpu_wheels.sh: more than 60 MiB would travel" >&2; exit 1
fi
