#!/usr/bin/env bash
# envhive's JAX tests (tests/with_jax: env.xla() and api="jax") on other jax releases than the
# installed one: for each version, jax and jaxlib of that version go into a scratch directory
# put first on PYTHONPATH (everything else comes from the current environment: numpy, scipy,
# ml_dtypes, envhive's build), then the tests run.
#
#   tools/jax_versions.sh            # the oldest release envhive supports (pyproject: jax>=0.5)
#   tools/jax_versions.sh 0.6.2 0.7.0
#
# Needs network access to PyPI for the wheels (about 110 MB per version).
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(0.5.0)
scratch="$(mktemp -d /tmp/envhive-jax.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
status=0
for v in "${versions[@]}"; do
    target="$scratch/jax-$v"
    python -m pip download --quiet --no-deps -d "$scratch/wheels-$v" "jax==$v" "jaxlib==$v"
    python -m pip install --quiet --no-deps --target "$target" "$scratch/wheels-$v"/*.whl
    got="$(PYTHONPATH="$target" python -c 'import jax; print(jax.__version__)')"
    if [ "$got" != "$v" ]; then
        echo "jax_versions: asked for jax $v, imported $got" >&2; exit 2
    fi
    echo "== jax $v"
    PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}" python -m pytest -q -n 2 -p no:cacheprovider tests/with_jax \
        || status=1
done
exit "$status"
