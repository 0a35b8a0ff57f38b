#!/usr/bin/env bash
# The test suite's machine set-up (docs/testing.md): makes sure what the
# tests need is installed and running, then runs a command with
# TEST_DATABASE_URL exported.
#
#   scripts/test-env.sh make test-suite   # what `make test` runs
#   eval "$(scripts/test-env.sh)"          # set up, then export into this shell
#
# Idempotent, and fast when everything is there (a few checks, no network).
# As root on Debian it installs the missing packages with apt-get and starts
# the missing services; otherwise it prints exactly what to install or start
# and fails. It never makes a test skip: a test whose service is missing
# still fails and says so.
#
# Needed: gcc (race detector, sqlc), git, psql, the PostgreSQL server
# binaries (initdb, pg_ctl: throwaway clusters), libfaketime (the clock-skew
# scenario), pgbouncer (TestPgBouncer), chromium (the dashboard's browser
# tests); and, listening on 127.0.0.1: PostgreSQL 5432 (trust auth; the test
# database is created), NATS with JetStream 4222, Redis 6379, RabbitMQ 5672.
# With WORKQ_FAILOVER_PGAF=1 (make faults-failover) also pg_auto_failover
# (pg_autoctl) for the server's major version.
set -euo pipefail
cd "$(dirname "$0")/.."

# /usr/sbin: pgbouncer, nats-server and rabbitmq-server live there, off a
# non-root PATH.
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
log() { echo "test-env: $*" >&2; }
die() { log "$*"; exit 1; }

command -v go >/dev/null 2>&1 \
  || die "the Go toolchain is missing: install Go $(sed -n 's/^go //p' go.mod) or newer (go.mod) into /usr/local/go or put it on PATH"

# --- packages ---------------------------------------------------------------

have_pg_server() {
  [ -n "${WORKQ_PG_BINDIR:-}" ] && [ -x "$WORKQ_PG_BINDIR/initdb" ] && return 0
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && return 0
  command -v initdb >/dev/null 2>&1
}
have_faketime() { compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

missing=() # Debian package names
need() { # need PACKAGE CHECK...
  local pkg=$1; shift
  "$@" || missing+=("$pkg")
}
need gcc have_cmd gcc
need git have_cmd git
need postgresql-client have_cmd psql
need postgresql have_pg_server
need faketime have_faketime
need pgbouncer have_cmd pgbouncer
need chromium have_cmd chromium
# Each service's package only when nothing listens on its port yet.
port_up 4222 || need nats-server have_cmd nats-server
port_up 6379 || need redis-server have_cmd redis-server
port_up 5672 || need rabbitmq-server have_cmd rabbitmq-server

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && have_cmd apt-get; then
    log "installing ${missing[*]} (apt-get; chromium alone takes about a minute)"
    # Wait for another apt-get on this machine rather than fail on its lock.
    apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
  elif have_cmd apt-get; then
    die "missing Debian packages: ${missing[*]}. Install them with: sudo apt-get install -y ${missing[*]}"
  else
    die "missing: ${missing[*]} (Debian package names; no apt-get here: install the equivalents with this system's package manager)"
  fi
fi

# The long failover scenario (make faults-failover, WORKQ_FAILOVER_PGAF=1)
# needs pg_auto_failover built for the server's major version: installed
# after the server.
if [ "${WORKQ_FAILOVER_PGAF:-}" = 1 ] && ! have_cmd pg_autoctl; then
  major=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
  pgaf="postgresql-${major:-15}-auto-failover"
  if [ "$(id -u)" = 0 ] && have_cmd apt-get; then
    log "installing $pgaf (apt-get)"
    apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$pgaf" >/dev/null
  else
    die "missing Debian package: $pgaf (pg_autoctl). Install it with: sudo apt-get install -y $pgaf"
  fi
fi

# --- services ---------------------------------------------------------------

as_root() { [ "$(id -u)" = 0 ] || die "$1 is not running and only root can start it here: $2"; }
await_port() { # await_port PORT SECONDS NAME
  local i
  for ((i = 0; i < $2; i++)); do port_up "$1" && return 0; sleep 1; done
  die "$3 did not come up on 127.0.0.1:$1"
}

if ! port_up 4222; then
  # NATS with JetStream: the JetStream publisher's tests (package publish).
  log "starting nats-server with JetStream on 127.0.0.1:4222"
  as_root nats-server "start-stop-daemon --start --background --exec $(command -v nats-server) -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server"
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec "$(command -v nats-server)" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  await_port 4222 30 nats-server
fi
if ! port_up 6379; then
  # Redis and RabbitMQ: the smoke test of scripts/brokerbench.
  log "starting redis-server on 127.0.0.1:6379 (no persistence: a test server)"
  redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no --daemonize yes >/dev/null
  await_port 6379 30 redis-server
fi
if ! port_up 5672; then
  log "starting rabbitmq-server on 127.0.0.1:5672 (takes up to a minute)"
  as_root rabbitmq-server "rabbitmq-server -detached"
  rabbitmq-server -detached >/dev/null 2>&1 || service rabbitmq-server start >/dev/null 2>&1 || true
  await_port 5672 90 rabbitmq-server
fi

# PostgreSQL: the test server is TEST_DATABASE_URL when it is set, else the
# machine's server on 127.0.0.1:5432 (started if it is installed but
# stopped) with a database named test. With no server there the tests start
# throwaway clusters from initdb instead (internal/testdb).
admin="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
has_test_db() { psql "$admin" -tAc "select count(*) from pg_database where datname = 'test'" 2>/dev/null; }
if [ -n "${TEST_DATABASE_URL:-}" ]; then
  pg_isready -q -d "$TEST_DATABASE_URL" || die "TEST_DATABASE_URL=$TEST_DATABASE_URL does not answer"
else
  n=$(has_test_db) || true
  if [ -z "$n" ] && ! pg_isready -q -h 127.0.0.1 -p 5432 && have_cmd pg_ctlcluster && compgen -G '/etc/postgresql/*/main' >/dev/null; then
    as_root PostgreSQL "pg_ctlcluster --skip-systemctl-redirect <version> main start"
    for v in $(ls /etc/postgresql | sort -V); do
      log "starting PostgreSQL $v"
      pg_ctlcluster --skip-systemctl-redirect "$v" main start || true
    done
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
    n=$(has_test_db) || true
  fi
  case "$n" in
  1) export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable" ;;
  0)
    log "creating the database test on 127.0.0.1:5432"
    psql "$admin" -qc 'create database test' >/dev/null
    export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
    ;;
  *) log "no PostgreSQL with trust auth on 127.0.0.1:5432: the tests start throwaway clusters from initdb" ;;
  esac
fi

if [ $# -eq 0 ]; then
  [ -z "${TEST_DATABASE_URL:-}" ] || printf 'export TEST_DATABASE_URL=%q\n' "$TEST_DATABASE_URL"
  exit 0
fi
exec "$@"
