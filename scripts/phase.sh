#!/usr/bin/env bash
# Run one phase of `make test` / `make demo`, saying what it is and how long it took.
#
#   scripts/phase.sh "Installing the locked dependencies" cmd args...
#   scripts/phase.sh --summary      print every phase's time so far, then forget them
#
# Times go to $PHASE_LOG (the Makefile names one file per make run; default
# var/phase-times.tsv), one "seconds<TAB>status<TAB>name" a line.
set -uo pipefail
LOG="${PHASE_LOG:-var/phase-times.tsv}"
mkdir -p "$(dirname "$LOG")"

case "${1:-}" in
  --summary)
    [ -f "$LOG" ] || exit 0
    echo ""
    echo "==> Time per phase"
    total=0
    while IFS=$'\t' read -r secs status name; do
      printf '    %7ss  %-7s %s\n' "$secs" "$status" "$name"
      total=$((total + secs))
    done <"$LOG"
    printf '    %7ss  total\n' "$total"
    rm -f "$LOG"
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
