#!/usr/bin/env bash
# Reproduces the throughput table of docs/decision.md: the same no-op
# workload (enqueue N small jobs, then consume them with an acknowledgement
# each) on workq, the raw SQL ceiling, Redis, NATS JetStream and RabbitMQ,
# interleaved in every round so that all of them see the same noise. Prints
# every round, then per backend the median and the range of the enqueue and
# consume rates. With CONCURRENT=1 (the default) each round also runs the
# producer and the consumers at once (workq: --duration, brokerbench: -mode
# concurrent).
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench?sslmode=disable scripts/bench-decision.sh
#   RUNS=5 N=200000 DURATION=20s CONCURRENT=1 AOF=1 scripts/bench-decision.sh
#
# Redis on this machine runs with --save "" --appendonly no (nothing reaches
# the disk). With AOF=1 (the default) the script also starts two throwaway
# redis-servers on ports 6390 (appendonly, appendfsync everysec) and 6391
# (appendfsync always), with their files under a temporary directory on
# the same disk as PostgreSQL's, and stops them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
RUNS=${RUNS:-5}
N=${N:-200000}
DURATION=${DURATION:-20s}
CONCURRENT=${CONCURRENT:-1}
AOF=${AOF:-1}
CEILING_DIR=${CEILING_DIR:-../shared/ceiling}

go build -o bin/workq ./cmd/workq
go build -o bin/brokerbench ./scripts/brokerbench
(cd "$CEILING_DIR" && go build -o "$OLDPWD/bin/ceiling" .)

declare -a pids=()
aofdir=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "$aofdir" ] && rm -rf "$aofdir"
}
trap cleanup EXIT
if [ "$AOF" = 1 ]; then
  aofdir=$(mktemp -d /var/tmp/workq-aof.XXXXXX)
  for spec in 6390:everysec 6391:always; do
    port=${spec%%:*} fsync=${spec##*:}
    mkdir -p "$aofdir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync "$fsync" \
      --dir "$aofdir/$port" --daemonize no --logfile "$aofdir/$port.log" &
    pids+=("$!")
  done
  for port in 6390 6391; do
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    echo "redis :$port: $(redis-cli -p "$port" config get appendfsync | tr '\n' ' ')" >&2
  done
fi
echo "redis :6379: $(redis-cli config get appendonly | tr '\n' ' ')$(redis-cli config get save | tr '\n' ' ')" >&2

# name|command (brokerbench lines print "enqueue ... = E msgs/s; consume ... = C msgs/s")
cases=(
  "redis-list|bin/brokerbench -backend redis-list"
  "redis-list-1by1|bin/brokerbench -backend redis-list -batch 1 -consumers 8"
  "redis-stream|bin/brokerbench -backend redis-stream"
  "jetstream|bin/brokerbench -backend jetstream"
  "rabbitmq|bin/brokerbench -backend rabbitmq"
  "rabbitmq-quorum|bin/brokerbench -backend rabbitmq-quorum"
)
if [ "$AOF" = 1 ]; then
  cases+=(
    "redis-list-aof-everysec|bin/brokerbench -backend redis-list -redis 127.0.0.1:6390"
    "redis-stream-aof-everysec|bin/brokerbench -backend redis-stream -redis 127.0.0.1:6390"
    "redis-list-aof-always|bin/brokerbench -backend redis-list -redis 127.0.0.1:6391"
    "redis-stream-aof-always|bin/brokerbench -backend redis-stream -redis 127.0.0.1:6391"
  )
fi

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
range() { sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.0f-%.0f", lo, hi}'; }
declare -A enq con cur
add() { eval "$1[\$2]+=\"\$3 \""; } # add ARRAY KEY VALUE

for i in $(seq 1 "$RUNS"); do
  line="round $i:"
  out=$(bin/ceiling -url "$DATABASE_URL" -n "$N" -batch 500 -c 2 2>&1) || { echo "ceiling failed: $out" >&2; exit 1; }
  e=$(sed -nE 's/^insert [0-9]+: ([0-9.]+) jobs\/s.*/\1/p' <<<"$out")
  c=$(sed -nE 's/.* = ([0-9.]+) rows\/s.*/\1/p' <<<"$out")
  add enq ceiling "$e"; add con ceiling "$c"; line+=" ceiling $e/$c;"
  out=$(bin/workq bench -n "$N" 2>&1) || { echo "workq bench failed: $out" >&2; exit 1; }
  e=$(sed -nE 's/^inserted [0-9]+ jobs \(([0-9.]+)\/s\).*/\1/p' <<<"$out")
  c=$(sed -nE 's/^burn-down: .* = ([0-9.]+) jobs\/s.*/\1/p' <<<"$out")
  add enq workq "$e"; add con workq "$c"; line+=" workq $e/$c;"
  if [ "$CONCURRENT" = 1 ]; then
    c=$(bin/workq bench --duration "$DURATION" 2>&1 | sed -nE 's/^continuous: .* = ([0-9.]+) jobs\/s.*/\1/p')
    add cur workq "$c"; line+=" workq continuous $c;"
  fi
  for cs in "${cases[@]}"; do
    name=${cs%%|*} cmd=${cs#*|}
    # A failed run is reported and left out of the medians.
    out=$($cmd -n "$N" 2>&1 | grep -v '^redis: ') || { echo "round $i: $name failed: $out" >&2; continue; }
    e=$(sed -nE 's/.*enqueue [0-9]+ in [0-9.]+s = ([0-9.]+) msgs\/s.*/\1/p' <<<"$out")
    c=$(sed -nE 's/.*consume [0-9]+ in [0-9.]+s = ([0-9.]+) msgs\/s.*/\1/p' <<<"$out")
    add enq "$name" "$e"; add con "$name" "$c"; line+=" $name $e/$c;"
    if [ "$CONCURRENT" = 1 ]; then
      c=$($cmd -n "$N" -mode concurrent 2>&1 | sed -nE 's/.*consume [0-9]+ in [0-9.]+s = ([0-9.]+) msgs\/s.*/\1/p') || c=""
      if [ -n "$c" ]; then add cur "$name" "$c"; line+=" concurrent $c;"; else echo "round $i: $name concurrent failed" >&2; fi
    fi
  done
  echo "$line (enqueue/consume per s)" >&2
done

printf '\n%-26s %-26s %-26s %s\n' backend "enqueue/s median (range)" "consume/s median (range)" "concurrent/s median (range)"
for name in ceiling workq $(for cs in "${cases[@]}"; do echo "${cs%%|*}"; done); do
  row() { local v=$1; [ -z "$v" ] && { echo "-"; return; }; printf '%.0f (%s)' "$(tr ' ' '\n' <<<"$v" | grep . | median)" "$(tr ' ' '\n' <<<"$v" | grep . | range)"; }
  printf '%-26s %-26s %-26s %s\n' "$name" "$(row "${enq[$name]:-}")" "$(row "${con[$name]:-}")" "$(row "${cur[$name]:-}")"
done
