#!/usr/bin/env bash
# Reproduces the outbox, inbox and NATS figures of docs/throughput.md: the
# ceiling's burn-down and `workq bench --table outbox` alternately, RUNS
# times (unkeyed and over 10,000 partition keys, 200,000 messages each),
# then the ordered outbox over 10 keys, the inbox receive benchmark and the
# JetStream relay. workq runs at its defaults.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench?sslmode=disable scripts/bench-kinds.sh
#   RUNS=5 N=200000 N10=20000 NATS_N=100000 scripts/bench-kinds.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
RUNS=${RUNS:-5}
N=${N:-200000}
N10=${N10:-20000}       # the 10-key run is bounded by 10 messages in flight: fewer messages
NATS_N=${NATS_N:-100000}
CEILING_DIR=${CEILING_DIR:-../shared/ceiling}

go build -o bin/workq ./cmd/workq
(cd "$CEILING_DIR" && go build -o "$OLDPWD/bin/ceiling" .)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
rate_of() { grep -E ' = [0-9.]+ (rows|jobs)/s' | head -1 | sed -E 's/.* = ([0-9.]+) (rows|jobs)\/s.*/\1/'; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN {printf "%.2f", x / y}'; }
pair_ratios() { local -n a=$1 b=$2; for i in "${!a[@]}"; do awk -v x="${a[$i]}" -v y="${b[$i]}" 'BEGIN {print x / y}'; done | median; }

bin/workq bench --table outbox -n 1000 2>/dev/null | grep '^config:' >&2
declare -a cb ou ok
for i in $(seq 1 "$RUNS"); do
  cb+=("$(bin/ceiling -url "$DATABASE_URL" -n "$N" -batch 500 -c 2 2>/dev/null | rate_of)")
  ou+=("$(bin/workq bench --table outbox -n "$N" 2>/dev/null | rate_of)")
  ok+=("$(bin/workq bench --table outbox -n "$N" --ordered-keys 10000 2>/dev/null | rate_of)")
  echo "run $i: ceiling ${cb[-1]}; outbox unkeyed ${ou[-1]} ($(ratio "${ou[-1]}" "${cb[-1]}")), ordered over 10000 keys ${ok[-1]} ($(ratio "${ok[-1]}" "${cb[-1]}"))" >&2
done
mcb=$(printf '%s\n' "${cb[@]}" | median)
for name in ou ok; do
  declare -n arr=$name
  m=$(printf '%s\n' "${arr[@]}" | median)
  label=$([ "$name" = ou ] && echo "outbox unkeyed $N:" || echo "outbox 10000 keys $N:")
  printf '%-26s %.0f msgs/s, ceiling %.0f rows/s: ratio of medians %.2f, median of paired ratios %.2f (%d runs)\n' \
    "$label" "$m" "$mcb" "$(awk -v a="$m" -v b="$mcb" 'BEGIN {print a / b}')" "$(pair_ratios "$name" cb)" "$RUNS"
done
declare -a k10
for i in 1 2 3; do
  k10+=("$(bin/workq bench --table outbox -n "$N10" --ordered-keys 10 2>/dev/null | rate_of)")
done
printf 'outbox 10 keys %d:         median %.0f msgs/s of 3 runs (%s)\n' "$N10" "$(printf '%s\n' "${k10[@]}" | median)" "${k10[*]}"
bin/workq bench --receive 2>/dev/null
TEST_DATABASE_URL="$DATABASE_URL" go test -run '^$' -bench BenchmarkJetStreamRelay -benchtime "${NATS_N}x" ./publish/ 2>/dev/null | grep -E 'Benchmark|msgs'
exit 0
