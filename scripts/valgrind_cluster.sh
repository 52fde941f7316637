# shellcheck shell=bash
# valgrind_cluster.sh -- shared by scripts/memcheck.sh and
# bench/instructions.sh, which run a throw-away server under valgrind.
# Source it; it defines functions only.

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# valgrind, and for bench/ gnuplot (scripts/packages.sh)
export SSLR_NEEDS=${SSLR_NEEDS:-bench}

# As postgres: a TLS-enabled data directory in $T/data listening on
# 127.0.0.1:$PORT (socket in $T), with tables t (about $MB MB of COPY text,
# frozen so that no later run pays for hint bits) and t2 (empty, same
# shape), and $T/t.copy.  The server is left stopped.
sslr_make_test_cluster() {
    bash "$SSLR_REPO/scripts/make_certs.sh" "$T/certs" "ssl_renegotiate bench CA" >/dev/null 2>&1
    initdb -D "$T/data" -A trust >/dev/null
    cat >>"$T/data/postgresql.conf" <<EOC
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$T'
ssl = on
ssl_cert_file = '$T/certs/server.crt'
ssl_key_file = '$T/certs/server.key'
fsync = off
synchronous_commit = off
autovacuum = off
EOC
    pg_ctl -D "$T/data" -l "$T/plain.log" -w start >/dev/null
    psql -X -q -h "$T" -p "$PORT" -d postgres <<EOC
CREATE TABLE t AS
  SELECT g AS id, md5(g::text) AS a, (g * 1.37)::numeric(14,2) AS b,
         timestamptz '2003-04-10' + g * interval '1 s' AS c, repeat('x', g % 17) AS d
  FROM generate_series(1, $((MB * 1000 * 1000 / 120))) g;
CREATE TABLE t2 (LIKE t);
VACUUM FREEZE t;
\copy t to '$T/t.copy'
EOC
    pg_ctl -D "$T/data" -w stop >/dev/null
}

# Wait until the server of $T answers (under valgrind it takes a while).
sslr_wait_ready() {
    for _ in $(seq 1 600); do
        pg_isready -q -h "$T" -p "$PORT" && return 0
        sleep 0.2
    done
    echo "server did not start" >&2
    return 1
}
