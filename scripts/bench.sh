#!/usr/bin/env bash
# Reproduces docs/throughput.md: runs ../shared/ceiling and `workq bench`
# alternately, RUNS times each, and prints the medians and our ratio to the
# ceiling measured in the same session.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable scripts/bench.sh
#   RUNS=5 N=200000 DURATION=30s WORKQ_FLAGS="--batch 500 --concurrency 1000" scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
RUNS=${RUNS:-3}
N=${N:-200000}
DURATION=${DURATION:-30s}
WORKQ_FLAGS=${WORKQ_FLAGS:-"--batch 500 --concurrency 1000"}
CEILING_DIR=${CEILING_DIR:-../shared/ceiling}

go build -o bin/workq ./cmd/workq
(cd "$CEILING_DIR" && go build -o "$OLDPWD/bin/ceiling" .)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
rate_of() { sed -E 's/.* = ([0-9.]+) (rows|jobs)\/s.*/\1/'; }

declare -a cb cc wb wc
for i in $(seq 1 "$RUNS"); do
  cb+=("$(bin/ceiling -url "$DATABASE_URL" -n "$N" -batch 500 -c 2 2>/dev/null | rate_of)")
  wb+=("$(bin/workq bench -n "$N" $WORKQ_FLAGS 2>/dev/null | rate_of)")
  cc+=("$(bin/ceiling -url "$DATABASE_URL" -n "$N" -batch 500 -c 2 -prefill=false 2>/dev/null | rate_of)")
  wc+=("$(bin/workq bench --duration "$DURATION" $WORKQ_FLAGS 2>/dev/null | rate_of)")
  echo "run $i: ceiling ${cb[-1]} / workq burn-down ${wb[-1]}; ceiling -prefill=false ${cc[-1]} / workq continuous ${wc[-1]}" >&2
done
# Two statistics: the ratio of the medians, and the median of the ratios of
# each run's pair (ceiling and workq measured minutes apart, on the same noise).
pair_ratios() { local -n a=$1 b=$2; for i in "${!a[@]}"; do awk -v x="${a[$i]}" -v y="${b[$i]}" 'BEGIN {print x / y}'; done | median; }
rb=$(pair_ratios wb cb); rc=$(pair_ratios wc cc)
mcb=$(printf '%s\n' "${cb[@]}" | median); mwb=$(printf '%s\n' "${wb[@]}" | median)
mcc=$(printf '%s\n' "${cc[@]}" | median); mwc=$(printf '%s\n' "${wc[@]}" | median)
printf 'burn-down  %d jobs: workq %.0f jobs/s, ceiling %.0f rows/s, ratio of medians %.2f, median of paired ratios %.2f (%d runs)\n' "$N" "$mwb" "$mcb" "$(awk -v a="$mwb" -v b="$mcb" 'BEGIN {print a / b}')" "$rb" "$RUNS"
printf 'continuous %s:  workq %.0f jobs/s, ceiling(-prefill=false) %.0f rows/s, ratio of medians %.2f, median of paired ratios %.2f (%d runs)\n' "$DURATION" "$mwc" "$mcc" "$(awk -v a="$mwc" -v b="$mcc" 'BEGIN {print a / b}')" "$rc" "$RUNS"
bin/workq bench --duration 20s --rate 100 $WORKQ_FLAGS 2>/dev/null
