#!/usr/bin/env bash
# Reproduces docs/throughput.md "Sustained" items 3 and 4 (issue 21):
#   backlog: burn-downs of 100,000 and of 1,000,000 alternately, RUNS times,
#            for job runs and for unkeyed outbox messages; reports the median
#            of the paired ratios 1M/100k (target >= 0.9).
#   series:  SERIES (default 10) consecutive outbox burn-downs of 200,000;
#            reports the slowest against the median (target >= 0.8).
# workq runs at its defaults.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench?sslmode=disable scripts/bench-flat.sh
#   PARTS="series" SERIES=10 scripts/bench-flat.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
RUNS=${RUNS:-3}
SERIES=${SERIES:-10}
SMALL=${SMALL:-100000}
BIG=${BIG:-1000000}
PARTS=${PARTS:-"backlog series"}
export DATABASE_URL
go build -o bin/workq ./cmd/workq

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
rate_of() { grep -E ' = [0-9.]+ (rows|jobs|msgs)/s' | head -1 | sed -E 's/.* = ([0-9.]+) (rows|jobs|msgs)\/s.*/\1/'; }

bin/workq bench -n 1000 2>/dev/null | grep '^config:' >&2
for part in $PARTS; do
  case $part in
  backlog)
    for table in job_runs outbox; do
      declare -a ratios=() smalls=() bigs=()
      for i in $(seq 1 "$RUNS"); do
        s=$(bin/workq bench --table "$table" -n "$SMALL" 2>/dev/null | rate_of)
        b=$(bin/workq bench --table "$table" -n "$BIG" 2>/dev/null | rate_of)
        smalls+=("$s"); bigs+=("$b")
        ratios+=("$(awk -v x="$b" -v y="$s" 'BEGIN {printf "%.3f", x / y}')")
        echo "$table pair $i: $SMALL -> $s/s, $BIG -> $b/s, ratio ${ratios[-1]}" >&2
      done
      printf '%s: burn-down %d median %.0f/s, %d median %.0f/s; median of paired ratios %s (%s)\n' "$table" \
        "$SMALL" "$(printf '%s\n' "${smalls[@]}" | median)" "$BIG" "$(printf '%s\n' "${bigs[@]}" | median)" \
        "$(printf '%s\n' "${ratios[@]}" | median)" "${ratios[*]}"
    done ;;
  series)
    declare -a rs=()
    for i in $(seq 1 "$SERIES"); do
      rs+=("$(bin/workq bench --table outbox -n 200000 2>/dev/null | rate_of)")
      echo "outbox burn-down $i: ${rs[-1]} msgs/s" >&2
    done
    med=$(printf '%s\n' "${rs[@]}" | median)
    low=$(printf '%s\n' "${rs[@]}" | sort -n | head -1)
    printf 'outbox series of %d burn-downs of 200000: median %.0f, slowest %.0f = %.2fx the median (%s)\n' \
      "$SERIES" "$med" "$low" "$(awk -v x="$low" -v y="$med" 'BEGIN {print x / y}')" "${rs[*]}" ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
