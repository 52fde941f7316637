#!/usr/bin/env bash
# bench/replication.sh -- what does key rotation cost a replication stream?
#
# A primary and a streaming standby, both with ssl_renegotiate preloaded,
# replicating over TLS 1.3 (primary_conninfo with sslmode=require on
# 127.0.0.1), synchronously (synchronous_standby_names = the standby,
# synchronous_commit = on), so that every commit waits for the walsender to
# deliver its WAL and for the standby's reply: the write load's rate is the
# stream's.  fsync = off on both: the disk is not what is measured.
#
# Two steady pgbench write loads, over the primary's Unix socket (which the
# extension does not count): "tpcb", pgbench's TPC-B like transaction (about
# 0.5 kB of WAL each), and "rows", a transaction inserting 8 rows of 1 kB
# (about 9 kB of WAL each: more bytes per commit, so more rotations per
# second).  full_page_writes = off and no checkpoint during the runs keep
# the WAL per transaction steady (full-page images after a checkpoint would
# make the WAL rate swing with the checkpoint cycle).  Rounds of
# SSLR_REPL_SECONDS seconds per load and setting: each round runs, for each
# load, both settings of the primary's
# ssl_renegotiate.byte_limit, 0 (off: counting only) and SSLR_REPL_LIMIT
# (default 64kB), changed with ALTER SYSTEM + pg_reload_conf() for the one
# live walsender (its row's byte_limit column confirms the limit in force
# before the load starts); the order alternates from round to round
# (ABBA), so that the machine's drift falls on both.  Per run: WAL bytes
# (pg_current_wal_lsn before and after), WAL MB/s, pgbench's tps, the
# walsender's bytes and rotations each way and its CPU time
# (/proc/PID/schedstat), all as deltas of the walsender's
# ssl_renegotiate_activity row.  Per round, the ratio of the WAL rates
# (limit / off); the report gives their median [min-max].
#
# Run as root (scripts/setup.sh builds and installs the extension for the
# PostgreSQL of SSLR_PG_CONFIG, default Debian's 15); about
# 4 * ROUNDS * SECONDS + 30 s (with both loads).  Output: a table on stdout, also in
# bench/results/replication-<date>.txt, and the samples in
# bench/results/replication-<date>.csv.
#
# Environment:
#   SSLR_REPL_ROUNDS   rounds (default 8)
#   SSLR_REPL_SECONDS  seconds of load per run (default 8)
#   SSLR_REPL_LOADS    loads (default "tpcb rows")
#   SSLR_REPL_LIMIT    the byte_limit compared with 0 (default 64kB)
#   SSLR_REPL_CLIENTS  pgbench -c (default 4)
#   SSLR_REPL_SCALE    pgbench -i -s (default 10)
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

if [ -z "${SSLR_REPL_INNER:-}" ]; then
    sslr_require_root replication.sh
    OUT_DIR=/tmp/ssl_renegotiate-replication-results
    sslr_results_dir "$OUT_DIR"
    (SSLR_WORKDIR=/tmp/ssl_renegotiate-replication sslr_rerun_as_postgres bench/replication.sh \
        SSLR_REPL_INNER SSLR_REPL_OUT="$OUT_DIR" SSLR_REPL_REV="$(sslr_revision)" \
        SSLR_REPL_ROUNDS="${SSLR_REPL_ROUNDS:-8}" SSLR_REPL_SECONDS="${SSLR_REPL_SECONDS:-8}" \
        SSLR_REPL_LOADS="${SSLR_REPL_LOADS:-tpcb rows}" \
        SSLR_REPL_LIMIT="${SSLR_REPL_LIMIT:-64kB}" SSLR_REPL_CLIENTS="${SSLR_REPL_CLIENTS:-4}" \
        SSLR_REPL_SCALE="${SSLR_REPL_SCALE:-10}")
    sslr_collect_results "$OUT_DIR"
    exit 0
fi

# ================================================================ postgres
export PATH="$PG_BINDIR:$PATH"
export LC_ALL=C LC_NUMERIC=C
ROUNDS=$SSLR_REPL_ROUNDS SECONDS_PER_RUN=$SSLR_REPL_SECONDS LIMIT=$SSLR_REPL_LIMIT
OUT=$SSLR_REPL_OUT
STAMP=$(date +%Y-%m-%d_%H%M)
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }

free_port() {
    local p
    for p in $(seq "$1" $(($1 + 99))); do
        [ -z "$(ss -Hltn "( sport = :$p )" 2>/dev/null)" ] && { echo "$p"; return 0; }
    done
    echo "replication.sh: no free port from $1" >&2
    return 1
}
T=$(mktemp -d /tmp/sslr-replication.XXXXXX)
cleanup() {
    local d
    for d in standby primary; do
        [ -f "$T/$d/postmaster.pid" ] && pg_ctl -D "$T/$d" -m immediate stop >/dev/null 2>&1
    done
    rm -rf "$T"
}
trap cleanup EXIT
PPORT=$(free_port 56700)
SPORT=$(free_port $((PPORT + 1)))

# ------------------------------------------------------------------ set-up
log "primary on port $PPORT, standby on port $SPORT, both preloaded"
bash "$SSLR_REPO/scripts/make_certs.sh" "$T/certs" "ssl_renegotiate bench CA" >/dev/null 2>&1
initdb -D "$T/primary" -A trust >/dev/null
cat >>"$T/primary/postgresql.conf" <<EOC
listen_addresses = '127.0.0.1'
port = $PPORT
unix_socket_directories = '$T'
ssl = on
ssl_cert_file = '$T/certs/server.crt'
ssl_key_file = '$T/certs/server.key'
shared_preload_libraries = 'ssl_renegotiate'
ssl_renegotiate.byte_limit = 0
fsync = off
autovacuum = off
shared_buffers = 256MB
full_page_writes = off
checkpoint_timeout = 1h
max_wal_size = 4GB
wal_keep_size = 1GB
EOC
echo "hostssl replication all 127.0.0.1/32 trust" >>"$T/primary/pg_hba.conf"
pg_ctl -D "$T/primary" -l "$T/primary.log" -w start >/dev/null
P="host=$T port=$PPORT dbname=postgres"
psql -X -q -d "$P" -c 'CREATE EXTENSION ssl_renegotiate'
pgbench -q -i -s "$SSLR_REPL_SCALE" "$P" 2>/dev/null
psql -X -q -d "$P" -c 'CREATE TABLE w (s text)'
echo "INSERT INTO w SELECT repeat(md5(random()::text), 32) FROM generate_series(1, 8);" >"$T/rows.sql"
pg_basebackup -D "$T/standby" -d "$P" -c fast
cat >>"$T/standby/postgresql.conf" <<EOC
port = $SPORT
primary_conninfo = 'host=127.0.0.1 port=$PPORT sslmode=require ssl_min_protocol_version=TLSv1.3 gssencmode=disable application_name=standby'
EOC
touch "$T/standby/standby.signal"
pg_ctl -D "$T/standby" -l "$T/standby.log" -w start >/dev/null

q() { psql -X -At -F' ' -d "$P" -c "$1"; }
# synchronous from now on (set earlier, the set-up's commits would wait)
q "ALTER SYSTEM SET synchronous_standby_names = 'standby'" >/dev/null
q 'SELECT pg_reload_conf()' >/dev/null
for _ in $(seq 1 100); do
    [ "$(q "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'")" = sync ] && break
    sleep 0.1
done
WALPID=$(q "SELECT pid FROM pg_stat_replication WHERE application_name = 'standby' AND sync_state = 'sync'")
[ -n "$WALPID" ] || { echo "replication.sh: the standby is not streaming synchronously" >&2; exit 1; }
TLS=$(q "SELECT version FROM pg_stat_ssl WHERE pid = $WALPID AND ssl")
[ -n "$TLS" ] || { echo "replication.sh: the walsender is not on TLS" >&2; exit 1; }
log "walsender $WALPID streams over $TLS, synchronously"

# ------------------------------------------------------------------ rounds
LIMIT_BYTES=$(q "SELECT pg_size_bytes('$LIMIT')")
# Sets the primary's byte_limit and waits until the walsender enforces it
# (its row's byte_limit: NULL when off).
set_limit() {
    local want=$1 expect
    q "ALTER SYSTEM SET ssl_renegotiate.byte_limit = '$want'" >/dev/null
    q 'SELECT pg_reload_conf()' >/dev/null
    [ "$want" = 0 ] && expect='' || expect=$LIMIT_BYTES
    for _ in $(seq 1 200); do
        # a commit: WAL for the walsender to send (it applies the reload in
        # its loop, and publishes the limit at its next write)
        q 'SELECT pg_current_xact_id()' >/dev/null
        [ "$(q "SELECT coalesce(byte_limit::text, '') FROM ssl_renegotiate_activity WHERE pid = $WALPID")" = "$expect" ] &&
            return 0
        sleep 0.05
    done
    echo "replication.sh: the walsender did not take byte_limit = $want" >&2
    exit 1
}
# The walsender's counters, its CPU time (ns) and the WAL position.
sample() {
    q "SELECT bytes_sent, bytes_received, rekeys_sent, rekeys_received, rekey_failures, pg_current_wal_lsn() - '0/0'
       FROM ssl_renegotiate_activity WHERE pid = $WALPID" | tr '\n' ' '
    cut -d' ' -f1 "/proc/$WALPID/schedstat"
}
CSV=$OUT/replication-$STAMP.csv
echo "load,round,limit,seconds,wal_bytes,wal_mb_per_s,tps,walsender_sent,walsender_received,rekeys_sent,rekeys_received,rekey_failures,walsender_cpu_ms" >"$CSV"
run() {
    local load=$1 round=$2 limit=$3 s0 s1 tps script=()
    [ "$load" = rows ] && script=(-f "$T/rows.sql")
    set_limit "$limit"
    s0=$(sample)
    tps=$(pgbench -n "${script[@]}" -c "$SSLR_REPL_CLIENTS" -j 2 -T "$SECONDS_PER_RUN" "$P" 2>/dev/null |
        awk '/^tps = / { print $3; exit }')
    s1=$(sample)
    [ "$(q "SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'")" = "$WALPID" ] ||
        { echo "replication.sh: the walsender changed" >&2; exit 1; }
    # fields: load round limit seconds, then each sample's sent received
    # rekeys_sent rekeys_received failures lsn cpu_ns (5-11, 12-18), tps
    echo "$load $round $limit $SECONDS_PER_RUN $s0 $s1 $tps" | awk '{
        wal = $17 - $10
        printf "%s,%d,%s,%d,%d,%.2f,%.1f,%d,%d,%d,%d,%d,%.0f\n", $1, $2, $3, $4, wal, wal / $4 / 1e6, $19,
            $12 - $5, $13 - $6, $14 - $7, $15 - $8, $16 - $9, ($18 - $11) / 1e6 }' >>"$CSV"
    log "$load, round $round, byte_limit $limit: $(tail -n 1 "$CSV")"
}
log "$ROUNDS rounds of ${SECONDS_PER_RUN}s per load ($SSLR_REPL_LOADS) and setting, pgbench -c $SSLR_REPL_CLIENTS, scale $SSLR_REPL_SCALE"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then order="0 $LIMIT"; else order="$LIMIT 0"; fi
    for load in $SSLR_REPL_LOADS; do
        for limit in $order; do run "$load" "$round" "$limit"; done
    done
done
FAILED_LOG=$(cat "$T/primary.log" "$T/standby.log" |
    awk '/SSL error|could not (send|receive) data|terminating walsender/ { n++ } END { print n + 0 }')

# ------------------------------------------------------------------ report
# median [min-max] of a column of numbers
summary() {
    sort -g | awk '{ v[NR] = $1 } END {
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f [%.3f-%.3f]", m, v[1], v[NR] }'
}
# per round of load $1: the ratio (at the limit / at 0) of column $2 (6 WAL
# MB/s, 7 tps), or with $2 = cpu, of the walsender's CPU per transaction
ratios() {
    awk -F, -v load="$1" -v c="$2" 'NR > 1 && $1 == load {
            v = c == "cpu" ? $13 / ($7 * $4) : $c
            if ($3 == "0") off[$2] = v; else on[$2] = v; n = $2 }
        END { for (r = 1; r <= n; r++) print on[r] / off[r] }' "$CSV"
}
TXT=$OUT/replication-$STAMP.txt
{
    echo "# bench/replication.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), revision $SSLR_REPL_REV"
    echo "# PostgreSQL $(pg_config --version | awk '{ print $2 }'), $(openssl version | awk '{ print $1, $2 }'), walsender on $TLS, synchronous replication,"
    echo "# pgbench -c $SSLR_REPL_CLIENTS -j 2 (scale $SSLR_REPL_SCALE), ${SECONDS_PER_RUN}s per run, $ROUNDS rounds (ABBA), nproc $(nproc)"
    echo
    awk -F, 'NR > 1 {
        printf "%-4s round %d  byte_limit %-5s  WAL %6.1f MB %6.2f MB/s  %7.1f tps  walsender sent %6.1f MB, received %5.0f kB, rotations sent %4d, received %3d, failures %d, CPU %5.0f ms\n",
            $1, $2, $3, $5 / 1e6, $6, $7, $8 / 1e6, $9 / 1e3, $10, $11, $12, $13 }' "$CSV"
    for load in $SSLR_REPL_LOADS; do
        echo
        echo "$load: byte_limit = $LIMIT / byte_limit = 0, per round, median [min-max] over $ROUNDS rounds:"
        echo "  WAL throughput $(ratios "$load" 6 | summary); tps $(ratios "$load" 7 | summary); walsender CPU per transaction $(ratios "$load" cpu | summary)"
        awk -F, -v load="$load" -v limit="$LIMIT" 'NR > 1 && $1 == load && $3 != "0" {
                sent += $8; recv += $9; rs += $10; rr += $11; fail += $12; s += $4 }
            END {
                printf "  at %s, the walsender sent %.1f MB (%.2f MB/s) with %d rotations of its sending key (%.1f/s, one per %.0f kB) and received %.0f kB with %d rotations of the standby'"'"'s (%.1f/s); failures %d\n",
                    limit, sent / 1e6, sent / s / 1e6, rs, rs / s, rs ? sent / rs / 1024 : 0, recv / 1e3, rr, rr / s, fail
            }' "$CSV"
    done
    echo
    echo "SSL or connection errors in the server logs: $FAILED_LOG"
} | tee "$TXT"
