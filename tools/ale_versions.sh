#!/usr/bin/env bash
# The Atari suite on each ale-py minor version the threaded engine allows (envs/atari/_ale.py:
# ALE_VERSIONS): a scratch venv per version with that ale-py from PyPI, the engine's self-check
# verdict (run in a subprocess, as in use) and the libstdc++ string ABI it found, then
# tests/atari. docs/atari.md quotes its output.
#
#   tools/ale_versions.sh                 # 0.10, 0.11 and 0.12 (the newest patch of each)
#   tools/ale_versions.sh 0.11.2          # one version
#
# Each venv installs ale-py alone; everything else comes from the Python running this script
# (a .pth file puts its site-packages after the venv's own, so the venv's ale-py wins): run it
# from the venv you test in (source /work/venv/bin/activate). Venvs go under $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("0.10.*" "0.11.*" "0.12.*")
python="$(command -v python)"
base_site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$python" setup.py build_ext --inplace -q >/dev/null 2>&1 || true
work="$(mktemp -d "${TMPDIR:-/tmp}/envhive-ale.XXXXXX")"
trap 'rm -rf "$work"' EXIT
status=0
for spec in "${versions[@]}"; do
    venv="$work/ale-${spec//[^0-9.]/}"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "ale-py==$spec"
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo "$base_site" > "$site/zz-envhive-base.pth"
    cache="$venv/cache"  # a fresh verdict per version (the self-check runs once here)
    export ENVHIVE_CACHE_DIR="$cache" PYTHONPATH="$root/src:$root"
    version="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("ale-py"))')"
    echo "== ale-py $version"
    "$venv/bin/python" - <<'PY'
import time
from envhive.envs.atari import _ale
start = time.perf_counter()
problem = _ale.binding_problem()
lib = _ale.ale_library()
import subprocess
symbols = subprocess.run(["nm", "-D", "--defined-only", lib.path], capture_output=True, text=True).stdout
abi = "new (__cxx11)" if "ALEInterface6setIntERKNSt7__cxx11" in symbols else "old" if "ALEInterface6setIntERKSsi" in symbols else "?"
print(f"self-check: {'passed' if problem is None else problem} ({time.perf_counter() - start:.1f} s); "
      f"string ABI: {abi}; ROMs: {len(__import__('envhive.envs.atari', fromlist=['rom_ids']).rom_ids())} ids")
PY
    set +e
    "$venv/bin/python" -m pytest tests/atari -q -n 2 -p no:cacheprovider > "$venv/pytest.log" 2>&1
    code=$?
    set -e
    grep -E "^(FAILED|ERROR)" "$venv/pytest.log" || true
    tail -n 1 "$venv/pytest.log"
    [ $code -eq 0 ] || status=1
done
exit $status
