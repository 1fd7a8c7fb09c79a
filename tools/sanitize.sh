#!/usr/bin/env bash
# envhive's compiled code under AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Builds every C/C++ extension setup.py declares (whatever it declares: the build is setup.py's
# own build_ext) with -fsanitize=address,undefined into a scratch copy of the source, checks
# each was built and linked against the sanitizers (setup.py marks them optional: a failed
# build would otherwise be skipped silently), then runs the native, Atari, interrupt and
# C-loop suites on that build with the ASan runtime preloaded into Python (CPython is not
# instrumented; the extensions are, and ASan's allocator is the process's). Every sanitizer
# report goes to a log file; the run fails if the tests fail or if there is a single report.
#
#   tools/sanitize.sh                       # the default suites (docs/reliability.md: time)
#   tools/sanitize.sh tests/test_runloop.py # other test paths instead
#
# Needs gcc/g++ with libasan and libubsan (Debian: gcc's own). Leak detection is off: CPython
# and numpy keep allocations alive until exit by design, which LeakSanitizer would report.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
    suites=(tests/test_runloop.py tests/test_bad_returns.py tests/kernels tests/atari tests/native_core
            tests/test_interrupts.py tests/test_interrupt_races.py)
fi

scratch="$(mktemp -d /tmp/envhive-sanitize.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
# The source as it is in the work tree (uncommitted changes included), without built files.
tar --exclude='*.so' --exclude='__pycache__' --exclude='build' -cf - \
    src tests examples tools setup.py pyproject.toml README.md | tar -xf - -C "$scratch"

asan="$(gcc -print-file-name=libasan.so)"
ubsan="$(gcc -print-file-name=libubsan.so)"
for lib in "$asan" "$ubsan"; do
    [ -e "$lib" ] || { echo "sanitize: $lib not found (install gcc with its sanitizers)" >&2; exit 2; }
done

flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
echo "== building every extension of setup.py with: $flags"
(cd "$scratch" && CFLAGS="$flags" CXXFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
    python setup.py -q build_ext --inplace --force 2>&1 | grep -v '^copying' || true)

# Every extension setup.py declares must have been built, against the sanitizers.
modules_file="$scratch/extension-modules"
(cd "$scratch" && python - >"$modules_file" <<'PY'
import runpy

import setuptools

declared = {}
setuptools.setup = lambda **kwargs: declared.update(kwargs)  # read setup()'s arguments, build nothing
runpy.run_path("setup.py")
for ext in declared.get("ext_modules", []):
    print(ext.name)
PY
) || { echo "sanitize: cannot list setup.py's extensions" >&2; exit 2; }
mapfile -t modules <"$modules_file"
[ ${#modules[@]} -gt 0 ] || { echo "sanitize: setup.py declares no extension" >&2; exit 2; }
missing=0
for mod in "${modules[@]}"; do
    path="$(ls "$scratch/src/${mod//.//}".*.so 2>/dev/null | head -1 || true)"
    if [ -z "$path" ]; then
        echo "sanitize: $mod was not built" >&2; missing=1; continue
    fi
    # grep reads all of nm's output (no -q): with pipefail, nm killed by SIGPIPE when grep
    # stopped at the first match would fail the test on a large module.
    if ! nm -D "$path" | grep '__asan_init\|__asan_report' >/dev/null; then
        echo "sanitize: $mod is not instrumented by ASan" >&2; missing=1; continue
    fi
    echo "   built and instrumented: $mod"
done
[ "$missing" -eq 0 ] || exit 2

logs="$scratch/reports"
mkdir -p "$logs"
export LD_PRELOAD="$asan:$ubsan"
# alloc_dealloc_mismatch=0: EnvPool's prebuilt wheel (a reference in the Atari tests) frees with
# free() what it allocated with new, at import; it is not envhive's code and not built here.
# The suppression: Ray's prebuilt _raylet.so (its setproctitle, spt_setup) reads freed memory
# through strcmp when a test starts Ray in a subprocess (`envhive check` runs every executor);
# not envhive's code, not built here. It silences only interceptor calls made from that library.
printf 'interceptor_via_lib:_raylet.so\n' >"$scratch/asan.supp"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:log_path=$logs/asan:allocator_may_return_null=1:handle_segv=0:alloc_dealloc_mismatch=0:suppressions=$scratch/asan.supp"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
export PYTHONPATH="$scratch/src"
export ENVHIVE_CACHE_DIR="$scratch/cache"
# numba's on-disk cache fails with the ASan runtime preloaded (saving a compiled kernel raised
# numba's "no compiled object yet", and some tests then timed out); with the cache off every
# process compiles its kernels (slower, the same code) and those suites pass.
export ENVHIVE_CACHE=0
echo "== running ${suites[*]}"
status=0
# Not the Ray cases: Ray's own processes (raylet, GCS) inherit the preload and time out.
(cd "$scratch" && python -m pytest -q -p no:cacheprovider -n 2 -k "not ray" "${suites[@]}") || status=$?
unset LD_PRELOAD

reports=$(find "$logs" -type f | wc -l)
if [ "$reports" -ne 0 ]; then
    echo "== $reports sanitizer report(s):"
    for f in "$logs"/*; do echo "--- $f"; head -60 "$f"; done
    [ "$status" -ne 0 ] || status=1
fi
echo "== sanitizer reports: $reports; tests: $([ "$status" -eq 0 ] && echo passed || echo "failed ($status)")"
exit "$status"
