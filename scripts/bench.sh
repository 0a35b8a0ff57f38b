#!/usr/bin/env bash
# Reproduces docs/throughput.md: runs ../shared/ceiling and `workq bench`
# alternately, RUNS times, and prints medians and our ratios to the ceiling
# measured in the same run. workq runs at its defaults unless WORKQ_FLAGS
# says otherwise; LEASE2=1 adds the same runs with --lease 2s.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable scripts/bench.sh
#   RUNS=5 N=200000 DURATION=30s LEASE2=1 scripts/bench.sh
#
# The reference for both modes is the ceiling's burn-down (-batch 500 -c 2):
# its -prefill=false mode is bounded by its single producer and reads lower
# than a good continuous run, so it is printed for information only.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
RUNS=${RUNS:-5}
N=${N:-200000}
DURATION=${DURATION:-30s}
WORKQ_FLAGS=${WORKQ_FLAGS:-}
LEASE2=${LEASE2:-0}
CEILING_DIR=${CEILING_DIR:-../shared/ceiling}

go build -o bin/workq ./cmd/workq
(cd "$CEILING_DIR" && go build -o "$OLDPWD/bin/ceiling" .)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
rate_of() { grep -E ' = [0-9.]+ (rows|jobs)/s' | sed -E 's/.* = ([0-9.]+) (rows|jobs)\/s.*/\1/'; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN {printf "%.2f", x / y}'; }

bin/workq bench -n 1000 $WORKQ_FLAGS 2>/dev/null | grep '^config:' >&2
declare -a cb cc wb wc lb lc
for i in $(seq 1 "$RUNS"); do
  cb+=("$(bin/ceiling -url "$DATABASE_URL" -n "$N" -batch 500 -c 2 2>/dev/null | rate_of)")
  wb+=("$(bin/workq bench -n "$N" $WORKQ_FLAGS 2>/dev/null | rate_of)")
  wc+=("$(bin/workq bench --duration "$DURATION" $WORKQ_FLAGS 2>/dev/null | rate_of)")
  cc+=("$(bin/ceiling -url "$DATABASE_URL" -n "$N" -batch 500 -c 2 -prefill=false 2>/dev/null | rate_of)")
  line="run $i: ceiling ${cb[-1]}; workq burn-down ${wb[-1]} ($(ratio "${wb[-1]}" "${cb[-1]}")), continuous ${wc[-1]} ($(ratio "${wc[-1]}" "${cb[-1]}")); ceiling -prefill=false ${cc[-1]}"
  if [ "$LEASE2" = 1 ]; then
    lb+=("$(bin/workq bench -n "$N" --lease 2s $WORKQ_FLAGS 2>/dev/null | rate_of)")
    lc+=("$(bin/workq bench --duration "$DURATION" --lease 2s $WORKQ_FLAGS 2>/dev/null | rate_of)")
    line+="; --lease 2s burn-down ${lb[-1]} ($(ratio "${lb[-1]}" "${cb[-1]}")), continuous ${lc[-1]} ($(ratio "${lc[-1]}" "${cb[-1]}"))"
  fi
  echo "$line" >&2
done
# Two statistics: the ratio of the medians, and the median of the ratios of
# each run's pair (ceiling and workq measured seconds apart, on the same noise).
pair_ratios() { local -n a=$1 b=$2; for i in "${!a[@]}"; do awk -v x="${a[$i]}" -v y="${b[$i]}" 'BEGIN {print x / y}'; done | median; }
report() { # report NAME ARRAY
  local -n arr=$2
  local m; m=$(printf '%s\n' "${arr[@]}" | median)
  printf '%-24s workq %.0f jobs/s, ceiling %.0f rows/s: ratio of medians %.2f, median of paired ratios %.2f (%d runs)\n' \
    "$1" "$m" "$mcb" "$(awk -v a="$m" -v b="$mcb" 'BEGIN {print a / b}')" "$(pair_ratios "$2" cb)" "$RUNS"
}
mcb=$(printf '%s\n' "${cb[@]}" | median)
report "burn-down $N:" wb
report "continuous $DURATION:" wc
if [ "$LEASE2" = 1 ]; then
  report "--lease 2s burn-down:" lb
  report "--lease 2s continuous:" lc
fi
printf 'ceiling -prefill=false (information only): median %.0f rows/s\n' "$(printf '%s\n' "${cc[@]}" | median)"
bin/workq bench --duration 20s --rate 100 $WORKQ_FLAGS 2>/dev/null
[ "$LEASE2" = 1 ] && bin/workq bench --duration 20s --rate 100 --lease 2s $WORKQ_FLAGS 2>/dev/null
exit 0
