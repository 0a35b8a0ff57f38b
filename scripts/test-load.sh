#!/usr/bin/env bash
# Runs go test of PKGS COUNT times with LOAD CPU burners beside it (busy
# shell loops, killed when it ends), then tallies each test's passes and
# failures: the check that a test whose outcome depends on timing holds on
# a loaded 2-core machine as well as an idle one (docs/testing.md, "Tests
# that depend on timing"). Run it at LOAD=0 and at LOAD=16.
#
#   eval "$(scripts/test-env.sh)"
#   scripts/test-load.sh                                # . and ./internal/worker, -race, 5 times, load 16
#   PKGS=. RUN=Shard LOAD=0 scripts/test-load.sh
#   make test-load PKGS=./internal/worker LOAD=16
#
# The test binaries are built before the burners start. The full output
# goes to LOG (default .workq/test-load-LOAD.log). Exits 1 if any run of
# any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
PKGS=${PKGS:-. ./internal/worker}
RUN=${RUN:-}
COUNT=${COUNT:-5}
LOAD=${LOAD:-16}
RACE=${RACE--race}
TIMEOUT=${TIMEOUT:-60m}
LOG=${LOG:-.workq/test-load-$LOAD.log}
: "${TEST_DATABASE_URL:?set it (eval \"\$(scripts/test-env.sh)\")}"
mkdir -p "$(dirname "$LOG")"

# shellcheck disable=SC2086 # PKGS and RACE are lists of words
$GO test $RACE -count=1 -run '^$' $PKGS >/dev/null # build (and vet) first

burners=()
stop() {
  if ((${#burners[@]})); then
    kill "${burners[@]}" 2>/dev/null || true
    wait "${burners[@]}" 2>/dev/null || true
    burners=()
  fi
}
trap stop EXIT INT TERM
for _ in $(seq 1 "$LOAD"); do
  (while :; do :; done) &
  burners+=($!)
done

start=$(date +%s)
rc=0
# shellcheck disable=SC2086
$GO test $RACE -count="$COUNT" -timeout "$TIMEOUT" ${RUN:+-run "$RUN"} -v $PKGS >"$LOG" 2>&1 || rc=$?
load=$(cut -d' ' -f1 /proc/loadavg)
stop
echo "test-load: go test $RACE -count=$COUNT${RUN:+ -run '$RUN'} $PKGS with $LOAD burners: $(($(date +%s) - start))s, load average at the end $load (log: $LOG)"
# Top-level tests only: their lines start at the margin.
awk '/^--- (PASS|FAIL): / { t = $3; if ($2 == "PASS:") p[t]++; else f[t]++; seen[t] = 1 }
  END { for (t in seen) { n = p[t] + f[t]; printf "%-60s %d/%d passed%s\n", t, p[t], n, (f[t] ? "  FAILED " f[t] : "") } }' "$LOG" | sort
grep -E '^(ok|FAIL|---.*FAIL)' "$LOG" | grep -v '^--- ' || true
exit "$rc"
