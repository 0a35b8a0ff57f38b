# Sourced by bench-sustained.sh and bench-retention.sh (and, for testlike_start,
# bench-statements.sh and bench-river.sh): a throwaway
# PostgreSQL cluster with this project's production-like settings for this
# machine (2 cores, 24 GiB; docs/throughput.md "Sustained"): durable commits,
# autovacuum on at PostgreSQL's defaults, memory sized for the host.
# Needs PGBIN, PORT and SHARED_BUFFERS; prodlike_start sets DATA.

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# cluster_init NAME: initdb in a new /tmp/NAME.XXXXXX (sets DATA), listening
# on 127.0.0.1:PORT only.
cluster_init() {
  DATA=$(mktemp -d "/tmp/$1.XXXXXX")
  [ "$(id -u)" = 0 ] && chown postgres "$DATA"
  as_pg "$PGBIN/initdb" -D "$DATA/data" -U postgres -A trust -E UTF8 --no-instructions >/dev/null
  cat >>"$DATA/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
CONF
}

# prodlike_start NAME: initdb in a new /tmp/NAME.XXXXXX, append the settings
# and then any extra postgresql.conf lines read from standard input, start.
prodlike_start() {
  cluster_init "$1"
  cat >>"$DATA/data/postgresql.conf" <<CONF
max_connections = 200
shared_buffers = $SHARED_BUFFERS
effective_cache_size = 12GB
work_mem = 16MB
maintenance_work_mem = 1GB
max_wal_size = 8GB
checkpoint_timeout = 15min
checkpoint_completion_target = 0.9
wal_compression = on
random_page_cost = 1.1
autovacuum = on
log_autovacuum_min_duration = 0
CONF
  cat >>"$DATA/data/postgresql.conf"
  as_pg "$PGBIN/pg_ctl" -D "$DATA/data" -l "$DATA/server.log" -w -t 60 start >/dev/null
}

# testlike_start NAME: the same with the shared test server's settings
# instead (shared_buffers 128MB, autovacuum off, max_wal_size 1GB, durable
# commits): a server of its own for a measurement that must not share the
# test server with other sessions' runs, or that loads an extension
# (bench-statements.sh, bench-river.sh). Needs PGBIN and PORT only; stop it
# with prodlike_stop.
testlike_start() {
  cluster_init "$1"
  cat >>"$DATA/data/postgresql.conf" <<CONF
max_connections = 100
shared_buffers = 128MB
max_wal_size = 1GB
autovacuum = off
CONF
  cat >>"$DATA/data/postgresql.conf"
  as_pg "$PGBIN/pg_ctl" -D "$DATA/data" -l "$DATA/server.log" -w -t 60 start >/dev/null
}

# prodlike_stop LOG: stop the cluster, keep its server log as LOG, remove it.
prodlike_stop() {
  as_pg "$PGBIN/pg_ctl" -D "$DATA/data" -m fast -w stop >/dev/null || true
  cp "$DATA/server.log" "$1" 2>/dev/null || true
  rm -rf "$DATA"
}
