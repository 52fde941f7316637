#!/usr/bin/env bash
# demo.sh -- the 2003 TLS renegotiation experiment in miniature.  Run as root.
#
# Builds and installs ssl_renegotiate (scripts/setup.sh), then, as user
# postgres, in a throw-away directory:
#   * makes a CA and a server certificate (CN=localhost, SAN localhost and
#     127.0.0.1), initdb, ssl=on, shared_preload_libraries='ssl_renegotiate',
#     listening on 127.0.0.1 and a Unix socket in the directory only;
#   * creates a table t of about 60 MB of COPY text (SSLR_DEMO_ROWS rows,
#     default 600000);
#   * in ONE psql session over TLS 1.3 runs \copy t TO a file and \copy t2
#     FROM it, timed, then shows its own ssl_renegotiate_activity row, and,
#     while that session is still connected, from a Unix-socket connection
#     ssl_renegotiate_totals and a join with pg_stat_ssl / pg_stat_activity;
#   * does the same COPYs over the Unix socket (no TLS) for comparison;
#   * sets ssl_renegotiate.byte_limit = '64kB' (a new key every 64 kB, the kind of
#     setting of 2003) and repeats the TLS COPYs, showing timings and the
#     rekey columns next to the default;
#   * checks every copy is identical to t, prints a timing summary.
# The server is stopped and the directory removed on exit, also on failure.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# ===================================================================== root
if [ -z "${SSLR_DEMO_INNER:-}" ]; then
    sslr_require_root demo.sh
    # SSLR_PG_MAJOR=18 ./scripts/demo.sh: another major, built once
    sslr_select_major "${SSLR_PG_MAJOR:-15}"
    echo "=== Setup: packages, build and install of ssl_renegotiate ==="
    # The rest runs as postgres, from the postgres-owned copy of the tree.
    sslr_rerun_as_postgres scripts/demo.sh SSLR_DEMO_INNER \
        SSLR_DEMO_ROWS="${SSLR_DEMO_ROWS:-600000}" SSLR_DEMO_PORT="${SSLR_DEMO_PORT:-}"
fi

# ================================================================ postgres
export PATH="$PG_BINDIR:$PATH"
export PAGER=cat PSQL_PAGER=cat
ROWS=${SSLR_DEMO_ROWS:-600000}

heading() { printf '\n==================== %s ====================\n' "$*"; }
note() { printf -- '--> %s\n' "$*"; }

T=$(mktemp -d /tmp/ssl_renegotiate-demo.XXXXXX)
DATA=$T/data
STARTED=

cleanup() {
    local rc=$?
    trap - EXIT
    if [ -n "$STARTED" ] && [ -f "$DATA/postmaster.pid" ]; then
        echo
        note "stopping the demo server"
        pg_ctl -D "$DATA" -m fast -w stop >/dev/null 2>&1 || pg_ctl -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
    fi
    if [ "$rc" -ne 0 ] && [ -f "$T/server.log" ]; then
        echo "demo.sh: FAILED (exit status $rc); last lines of the server log:" >&2
        tail -n 30 "$T/server.log" >&2 || true
    fi
    rm -rf "$T"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ----------------------------------------------------------- certificates
heading "Throw-away CA and server certificate (CN=localhost, SAN localhost + 127.0.0.1)"
C=$T/certs
bash "$(dirname "${BASH_SOURCE[0]}")/make_certs.sh" "$C" "ssl_renegotiate demo CA" >"$T/openssl.log" 2>&1 ||
    { cat "$T/openssl.log" >&2; exit 1; }
openssl x509 -in "$C/server.crt" -noout -subject -issuer -ext subjectAltName | sed 's/^/    /'

# ------------------------------------------------------------------ port
# Two demos at once: one chooses a port and starts its server on it while
# the other waits, so that they never choose the same (the lock is let go
# once the server listens).
PORT_LOCK=/tmp/ssl_renegotiate-demo-port.lock
: >>"$PORT_LOCK" 2>/dev/null || true
exec 9<"$PORT_LOCK"
flock 9
port_free() { [ -z "$(ss -Hltn "( sport = :$1 )" 2>/dev/null)" ]; }
if [ -n "${SSLR_DEMO_PORT:-}" ]; then
    PORT=$SSLR_DEMO_PORT
    port_free "$PORT" || { echo "demo.sh: port $PORT is in use" >&2; exit 1; }
else
    PORT=
    for p in $(seq 55432 55531); do
        # neither a TCP listener nor a leftover socket file
        if port_free "$p" && [ ! -e "$T/.s.PGSQL.$p" ]; then PORT=$p; break; fi
    done
    [ -n "$PORT" ] || { echo "demo.sh: no free port in 55432-55531" >&2; exit 1; }
fi

# --------------------------------------------------------------- cluster
heading "initdb and start a server on 127.0.0.1:$PORT (socket dir $T)"
initdb -D "$DATA" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$T/initdb.log" 2>&1 ||
    { cat "$T/initdb.log" >&2; exit 1; }
cat >>"$DATA/postgresql.conf" <<EOF

# ---- ssl_renegotiate demo ----
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$T'
ssl = on
ssl_cert_file = '$C/server.crt'
ssl_key_file = '$C/server.key'
ssl_ca_file = '$C/ca.crt'
shared_preload_libraries = 'ssl_renegotiate'
# throw-away cluster: don't wait for the disk
fsync = off
synchronous_commit = off
full_page_writes = off
max_wal_size = 2GB
EOF
cat >"$DATA/pg_hba.conf" <<'EOF'
# TYPE  DATABASE  USER  ADDRESS       METHOD
local   all       all                 trust
hostssl all       all   127.0.0.1/32  trust
host    all       all   127.0.0.1/32  trust
EOF
STARTED=1
pg_ctl -D "$DATA" -l "$T/server.log" -w -t 60 start >/dev/null 9<&-
exec 9<&-
note "server running: $(psql -XAtq -h "$T" -p "$PORT" -d postgres -c 'SELECT version()')"

# psql over the Unix socket / over TLS 1.3 on 127.0.0.1
UNIX_CONN="host=$T port=$PORT dbname=postgres"
tls_conn() { echo "host=127.0.0.1 port=$PORT dbname=postgres sslmode=require ssl_min_protocol_version=TLSv1.3 gssencmode=disable application_name=$1"; }
q() { psql -X -q -v ON_ERROR_STOP=1 -P pager=off "$@"; }

q -d "$UNIX_CONN" -c 'CREATE EXTENSION ssl_renegotiate'
note "CREATE EXTENSION ssl_renegotiate: done"
q -d "$UNIX_CONN" -c "SELECT name, setting, unit FROM pg_settings WHERE name LIKE 'ssl_renegotiate.%' ORDER BY name"

# ------------------------------------------------------------------ data
heading "Test data: table t, $ROWS rows of varied COPY text"
q -d "$UNIX_CONN" <<EOF
CREATE TABLE t (
    id  integer,
    n   numeric,
    ts  timestamptz,
    s   text
);
INSERT INTO t
SELECT i,
       round((random() * 1e6)::numeric, 1 + i % 6),
       timestamptz '2003-01-01 00:00:00+00' + i * interval '7.3 seconds',
       md5(i::text) || ' ' || repeat(chr(97 + i % 26), i % 37) || ' row ' || i
FROM generate_series(1, $ROWS) AS i;
CREATE TABLE t2 (LIKE t);
CREATE TABLE t3 (LIKE t);
ANALYZE t;
EOF
note "t: $(q -At -d "$UNIX_CONN" -c "SELECT pg_size_pretty(pg_total_relation_size('t'))") on disk"

# per-row content hash summed over the table: cheap, order-independent
CHECK_SQL="SELECT count(*) || ' rows, hash sum ' || coalesce(sum(('x' || substr(md5(x::text), 1, 15))::bit(60)::bigint), 0)"
check_same() { # table label
    local a b
    a=$(q -At -d "$UNIX_CONN" -c "$CHECK_SQL FROM t x")
    b=$(q -At -d "$UNIX_CONN" -c "$CHECK_SQL FROM $1 x")
    if [ "$a" = "$b" ]; then
        note "$2: $1 is identical to t ($a)"
    else
        echo "demo.sh: $2: $1 differs from t: t: $a / $1: $b" >&2
        exit 1
    fi
}

# One psql session (stdin script) doing: COPY t TO file, COPY FROM file into
# $target, timed; lines "## step: LABEL" before each copy are for the summary.
copy_script() { # label file target
    cat <<EOF
TRUNCATE $3;
\\timing on
\\echo '## step: $1 COPY t TO file'
\\copy t to '$2'
\\echo '## step: $1 COPY $3 FROM file'
\\copy $3 from '$2'
\\timing off
EOF
}

ACTIVITY_SQL="SELECT * FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();"
REKEY_SQL="SELECT pid, version, cipher, bytes_sent, bytes_received, records_sent, records_received,
       rekeys_sent, rekeys_received, rekey_failures, rekey_time, last_rekey,
       max_sent_per_key, max_received_per_key
FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();"
JOIN_SQL="SELECT a.pid, p.application_name, p.client_addr, p.state,
       s.ssl, s.version AS ssl_version, s.cipher AS ssl_cipher, s.bits,
       a.bytes_sent, a.bytes_received, a.records_sent, a.records_received,
       a.rekeys_sent, a.rekeys_received, a.rekey_failures, a.max_sent_per_key
FROM ssl_renegotiate_activity a
JOIN pg_stat_ssl s USING (pid)
JOIN pg_stat_activity p USING (pid)
ORDER BY a.pid;"
TOTALS_SQL="SELECT * FROM ssl_renegotiate_totals;"

OUT=$T/session.out
: >"$OUT"
run_session() { psql -X -v ON_ERROR_STOP=1 -P pager=off -d "$1" 2>&1 | tee -a "$OUT"; }

# ------------------------------------------------- TLS, default byte_limit
heading "COPY over TLS 1.3, default ssl_renegotiate.byte_limit ($(q -At -d "$UNIX_CONN" -c 'SHOW ssl_renegotiate.byte_limit')), one psql session"
{
    echo "SELECT version AS tls_version, cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid();"
    copy_script "TLS 1.3, default byte_limit:" "$T/t_tls.copy" t2
    echo "\\echo"
    echo "\\echo '--> this session''s row in ssl_renegotiate_activity:'"
    echo "\\x on"
    echo "$ACTIVITY_SQL"
    echo "\\echo '--> the kernel''s TCP counters for this connection (server side; they include the 8-byte SSLRequest and the 1-byte answer):'"
    # (the pause lets the client's delayed ACK of the last reply arrive)
    echo "\\! sleep 0.3; ss -tinH state established '( sport = :$PORT )' | grep -Eo 'bytes_(sent|acked|received):[0-9]+' | sed 's/^/    /'"
    echo "\\echo '--> from a Unix-socket connection, while this TLS session is still connected: ssl_renegotiate_totals'"
    echo "\\! psql -X -q -P pager=off -P expanded=on -d '$UNIX_CONN' -c '$TOTALS_SQL'"
    echo "\\echo '--> ... and ssl_renegotiate_activity JOIN pg_stat_ssl JOIN pg_stat_activity'"
    echo "\\! psql -X -q -P pager=off -P expanded=on -d '$UNIX_CONN' -f '$T/join.sql'"
} >"$T/tls_default.sql"
printf '%s\n' "$JOIN_SQL" >"$T/join.sql"
run_session "$(tls_conn demo-tls-default)" <"$T/tls_default.sql"
note "copy file size: $(du -m "$T/t_tls.copy" | cut -f1) MB"
check_same t2 "TLS 1.3, default byte_limit"

# ------------------------------------------------------- Unix socket
heading "Same COPYs over the Unix socket (no TLS), for comparison"
copy_script "Unix socket (no TLS):" "$T/t_unix.copy" t3 >"$T/unix.sql"
run_session "$UNIX_CONN application_name=demo-unix" <"$T/unix.sql"
check_same t3 "Unix socket"
if cmp -s "$T/t_tls.copy" "$T/t_unix.copy"; then
    note "COPY TO files from TLS and Unix socket are byte-identical"
else
    echo "demo.sh: COPY TO files from TLS and Unix socket differ" >&2
    exit 1
fi
rm -f "$T/t_unix.copy"

# --------------------------------------------- TLS, the 2003 setting
heading "The 2003 setting: ALTER SYSTEM SET ssl_renegotiate.byte_limit = '64kB'"
# 2003 rotated at every 64 kB, however fast: by default a direction gets a
# new key at most once per min_rekey_gap (1s), so the developer's setting
# debug_min_rekey_gap = 0 repeats that pace here.
q -d "$UNIX_CONN" -c "ALTER SYSTEM SET ssl_renegotiate.byte_limit = '64kB'" \
    -c "ALTER SYSTEM SET ssl_renegotiate.debug_min_rekey_gap = 0" -c 'SELECT pg_reload_conf()' >/dev/null
sleep 1
note "ssl_renegotiate.byte_limit is now $(q -At -d "$UNIX_CONN" -c 'SHOW ssl_renegotiate.byte_limit'), at 2003's pace (debug_min_rekey_gap = 0; by default at most one new key a second)"
note "the two directions differ: the server rotates its own key at once, while libpq answers a request to rotate its key only when it next writes, and during a COPY FROM the server asks at most 8 times in a row before it sends data again (docs/clients.md)"

heading "COPY over TLS 1.3 with a new key every 64kB, one psql session"
{
    echo 'SHOW ssl_renegotiate.byte_limit;'
    copy_script "TLS 1.3, byte_limit 64kB:" "$T/t_tls64.copy" t2
    echo "\\echo"
    echo "\\echo '--> rekey columns of this session (compare with the default run above):'"
    echo "\\x on"
    echo "$REKEY_SQL"
    echo "\\echo '--> from a Unix-socket connection: ssl_renegotiate_totals'"
    echo "\\! psql -X -q -P pager=off -P expanded=on -d '$UNIX_CONN' -c '$TOTALS_SQL'"
} >"$T/tls_64k.sql"
run_session "$(tls_conn demo-tls-64kB)" <"$T/tls_64k.sql"
check_same t2 "TLS 1.3, byte_limit 64kB"

# ------------------------------------------------------------ summary
MB=$(du -m "$T/t_tls.copy" | cut -f1)
heading "Timing summary ($ROWS rows, $MB MB of COPY text)"
awk -v mb="$MB" '
    /^## step: / { sub(/^## step: /, ""); label = $0; next }
    /^Time: / && label != "" {
        printf "    %-44s %10.1f ms %8.1f MB/s\n", label, $2, ($2 > 0 ? mb * 1000 / $2 : 0)
        label = ""
    }
' "$OUT"
# what the table says about 2003's question: COPY TO at 64kB against the
# default, in this one run
ratio=$(awk '
    /^## step: / { sub(/^## step: /, ""); label = $0; next }
    /^Time: / && label != "" { ms[label] = $2; label = "" }
    END {
        d = ms["TLS 1.3, default byte_limit: COPY t TO file"]
        k = ms["TLS 1.3, byte_limit 64kB: COPY t TO file"]
        if (d > 0 && k > 0) printf "%.2f", k / d
    }
' "$OUT")
note "to conclude: COPY TO with a new key every 64 kB took ${ratio:-?}x the time of the default here (2003: 15x). These are single runs on a shared machine; bench/ measures the cost in interleaved rounds (docs/benchmark.md)."
