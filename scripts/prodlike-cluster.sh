# Sourced by bench-sustained.sh and bench-retention.sh: a throwaway
# PostgreSQL cluster with this project's production-like settings for this
# machine (2 cores, 24 GiB; docs/throughput.md "Sustained"): durable commits,
# autovacuum on at PostgreSQL's defaults, memory sized for the host.
# Needs PGBIN, PORT and SHARED_BUFFERS; prodlike_start sets DATA.

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# prodlike_start NAME: initdb in a new /tmp/NAME.XXXXXX, append the settings
# and then any extra postgresql.conf lines read from standard input, start.
prodlike_start() {
  DATA=$(mktemp -d "/tmp/$1.XXXXXX")
  [ "$(id -u)" = 0 ] && chown postgres "$DATA"
  as_pg "$PGBIN/initdb" -D "$DATA/data" -U postgres -A trust -E UTF8 --no-instructions >/dev/null
  cat >>"$DATA/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
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

# prodlike_stop LOG: stop the cluster, keep its server log as LOG, remove it.
prodlike_stop() {
  as_pg "$PGBIN/pg_ctl" -D "$DATA/data" -m fast -w stop >/dev/null || true
  cp "$DATA/server.log" "$1" 2>/dev/null || true
  rm -rf "$DATA"
}
