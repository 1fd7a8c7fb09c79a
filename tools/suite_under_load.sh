#!/usr/bin/env bash
# The whole test suite with two busy processes beside it (each keeps one core at 100 %), as a
# loaded CI machine would: no test may fail for being slow (docs/reliability.md).
#
#   tools/suite_under_load.sh [pytest arguments]     # default: -n 2 -q
set -uo pipefail
cd "$(dirname "$0")/.."
busy=()
for _ in 1 2; do
    python -c "while True: pass" &
    busy+=("$!")
done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-n 2 -q)
start=$(date +%s)
python -m pytest "${args[@]}"
status=$?
echo "suite under load: exit status $status in $(( $(date +%s) - start )) s (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
exit $status
