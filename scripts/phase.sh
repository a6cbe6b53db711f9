#!/usr/bin/env bash
# Run one phase of `make test` / `make demo`, saying what it is and how long it took.
#
#   scripts/phase.sh "Installing the locked dependencies" cmd args...
#   scripts/phase.sh --summary      print every phase's time since the last --reset
#   scripts/phase.sh --reset
#
# Times go to $PHASE_LOG (default var/phase-times.txt), one "seconds<TAB>status<TAB>name" a line.
set -uo pipefail
LOG="${PHASE_LOG:-var/phase-times.txt}"
mkdir -p "$(dirname "$LOG")"

case "${1:-}" in
  --reset) : >"$LOG"; exit 0 ;;
  --summary)
    echo ""
    echo "==> Time per phase"
    total=0
    while IFS=$'\t' read -r secs status name; do
      printf '    %7ss  %-7s %s\n' "$secs" "$status" "$name"
      total=$((total + secs))
    done <"$LOG"
    printf '    %7ss  total\n' "$total"
    exit 0 ;;
esac

name="$1"; shift
echo ""
echo "==> $name  ($(date -u +%H:%M:%S) UTC)"
start=$SECONDS
"$@"
rc=$?
secs=$((SECONDS - start))
status=$([ $rc -eq 0 ] && echo ok || echo "exit $rc")
echo "<== $name: $status after ${secs}s"
printf '%s\t%s\t%s\n' "$secs" "$status" "$name" >>"$LOG"
exit $rc
