# shellcheck shell=bash
# bench/run/setup.sh -- the benchmark's set-up, sourced by bench/run.sh (as
# postgres, in its throw-away directory $T): a CA and a server certificate,
# two free ports, clusters A (no extension) and B (preloaded) from one
# template, the table t of about $MB MiB in both, its COPY file $DATA, and
# pgbench's tables.  Defines PA PB, PM_A PM_B, UNIX_A UNIX_B, q qa qb,
# PG_VERSION, ROWS BYTES DATA_MB REF_MD5 TABLE_SIZE; sets STARTED_A/B for
# run.sh's cleanup.

# ----------------------------------------------------------- certificates
log "throw-away CA and server certificate in $T"
C=$T/certs
bash "$BENCH/../scripts/make_certs.sh" "$C" "ssl_renegotiate bench CA" >"$T/openssl.log" 2>&1 ||
    { cat "$T/openssl.log" >&2; exit 1; }

# ------------------------------------------------------------------ ports
port_free() { [ -z "$(ss -Hltn "( sport = :$1 )" 2>/dev/null)" ]; }
PORTS=()
for p in $(seq 56432 56631); do
    if port_free "$p"; then PORTS+=("$p"); fi
    [ ${#PORTS[@]} -lt 2 ] || break
done
[ ${#PORTS[@]} -eq 2 ] || die "no two free ports in 56432-56631"
PA=${PORTS[0]} PB=${PORTS[1]}

# --------------------------------------------------------------- clusters
# No client certificates are used, so by default no ssl_ca_file.  With one,
# PostgreSQL asks clients for a certificate (SSL_VERIFY_PEER), and OpenSSL
# resumes a session -- every TLS 1.2 renegotiation after the first -- only
# with a session id context (else an internal_error alert ends the
# connection: seen at 29c0059, fixed by 316f3fd).  SSLR_BENCH_SSL_CA=1 sets
# ssl_ca_file, to check that path.
SSL_CA_LINE="# ssl_ca_file: not set (SSLR_BENCH_SSL_CA=1 sets it)"
if [ -n "${SSLR_BENCH_SSL_CA:-}" ]; then SSL_CA_LINE="ssl_ca_file = '$C/ca.crt'"; fi
log "initdb (one template), clusters A (port $PA, no extension) and B (port $PB, extension preloaded)"
initdb -D "$T/template" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$T/initdb.log" 2>&1 ||
    { cat "$T/initdb.log" >&2; exit 1; }
cat >>"$T/template/postgresql.conf" <<EOF

# ---- ssl_renegotiate benchmark: identical in both clusters ----
listen_addresses = '127.0.0.1'
unix_socket_directories = '$T'
ssl = on
ssl_cert_file = '$C/server.crt'
ssl_key_file = '$C/server.key'
$SSL_CA_LINE
fsync = off
synchronous_commit = off
full_page_writes = off
wal_level = minimal
max_wal_senders = 0
max_wal_size = 4GB
checkpoint_timeout = 1h
autovacuum = off
jit = off
max_connections = 50
EOF
cat >"$T/template/pg_hba.conf" <<'EOF'
# TYPE     DATABASE  USER  ADDRESS       METHOD
local      all       all                 trust
hostssl    all       all   127.0.0.1/32  trust
hostnossl  all       all   127.0.0.1/32  trust
EOF
cp -a "$T/template" "$T/dataA"
mv "$T/template" "$T/dataB"
echo "port = $PA" >>"$T/dataA/postgresql.conf"
printf '%s\n' "port = $PB" "shared_preload_libraries = 'ssl_renegotiate'" >>"$T/dataB/postgresql.conf"
pg_ctl -D "$T/dataA" -l "$T/serverA.log" -w -t 60 start >/dev/null &
pid_a=$!
pg_ctl -D "$T/dataB" -l "$T/serverB.log" -w -t 60 start >/dev/null &
pid_b=$!
wait "$pid_a" || die "cluster A did not start: $(tail -n 5 "$T/serverA.log")"
wait "$pid_b" || die "cluster B did not start: $(tail -n 5 "$T/serverB.log")"
# read by bench/run.sh's clean-up, bench/run/runs.sh and tables.sh
# shellcheck disable=SC2034
STARTED_A=1 STARTED_B=1
# shellcheck disable=SC2034
PM_A=$(head -n 1 "$T/dataA/postmaster.pid")
# shellcheck disable=SC2034
PM_B=$(head -n 1 "$T/dataB/postmaster.pid")

UNIX_A="host=$T port=$PA dbname=postgres"
UNIX_B="host=$T port=$PB dbname=postgres"
q() { psql -X -q -v ON_ERROR_STOP=1 -P pager=off "$@"; }
qa() { q -At -d "$UNIX_A" "$@"; }
qb() { q -At -d "$UNIX_B" "$@"; }

qb -c 'CREATE EXTENSION ssl_renegotiate'
# shellcheck disable=SC2034 # for bench/run/tables.sh
PG_VERSION=$(qa -c 'SHOW server_version')
[ "$(qb -c "SELECT count(*) FROM pg_settings WHERE name = 'ssl_renegotiate.byte_limit'")" = 1 ] ||
    die "cluster B: ssl_renegotiate not loaded"
[ "$(qa -c "SELECT count(*) FROM pg_settings WHERE name = 'ssl_renegotiate.byte_limit'")" = 0 ] ||
    die "cluster A: ssl_renegotiate is loaded, it must not be"

# ------------------------------------------------------------------- data
TABLE_DDL="CREATE TABLE t (
    id      integer,
    grp     bigint,
    price   numeric(14,2),
    ratio   double precision,
    ts      timestamptz,
    day     date,
    flag    boolean,
    code    text,
    descr   text
);
CREATE TABLE t2 (LIKE t);"
row_select() { # first last
    cat <<EOF
SELECT i,
       (i::bigint * 7919) % 1000003,
       round((random() * 1e8)::numeric, 2),
       random() * 1000,
       timestamptz '2003-04-10 00:00:00+00' + i * interval '7.3 seconds',
       date '2003-04-10' + i % 3650,
       i % 3 = 0,
       md5(i::text),
       repeat(chr(97 + i % 26), i % 61) || ' row ' || i || CASE WHEN i % 7 = 0 THEN E' tab\\there' ELSE '' END
FROM generate_series($1, $2) AS i
EOF
}
SAMPLE_ROWS=20000
sample_bytes=$(qa -c "COPY ($(row_select 1 $SAMPLE_ROWS)) TO STDOUT" | wc -c)
ROWS=$(( (MB * 1048576 * SAMPLE_ROWS / sample_bytes) * 101 / 100 + 1 ))
log "loading $ROWS rows (about $MB MiB of COPY text) into cluster A"
qa <<EOF
$TABLE_DDL
INSERT INTO t $(row_select 1 "$ROWS");
EOF
DATA=$T/t.copy
q -d "$UNIX_A" -c "\\copy t to '$DATA'"
BYTES=$(stat -c %s "$DATA")
DATA_MB=$(awk -v b="$BYTES" 'BEGIN { printf "%.1f", b / 1048576 }')
REF_MD5=$(md5sum <"$DATA" | cut -d' ' -f1)
log "copy file: $BYTES bytes ($DATA_MB MiB), md5 $REF_MD5; loading it into cluster B"
qb <<EOF
$TABLE_DDL
EOF
q -d "$UNIX_B" -c "\\copy t from '$DATA'"
for u in "$UNIX_A" "$UNIX_B"; do
    q -d "$u" -c 'VACUUM (FREEZE, ANALYZE) t' -c 'CHECKPOINT'
done
# shellcheck disable=SC2034 # for bench/run/tables.sh
TABLE_SIZE=$(qa -c "SELECT pg_size_pretty(pg_relation_size('t'))")
if [ -z "${SSLR_BENCH_NO_PGBENCH:-}" ]; then
    log "pgbench -i -s $PGB_SCALE in both clusters"
    for p in "$PA" "$PB"; do
        pgbench -i -q -s "$PGB_SCALE" -h "$T" -p "$p" postgres >"$T/pgbench-init.log" 2>&1 ||
            { cat "$T/pgbench-init.log" >&2; exit 1; }
        psql -X -q -h "$T" -p "$p" -d postgres -c 'VACUUM (FREEZE, ANALYZE)' -c CHECKPOINT
    done
fi
