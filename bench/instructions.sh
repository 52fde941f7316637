#!/usr/bin/env bash
# instructions.sh -- what accounting and rotation cost, in CPU instructions.
#
# Wall-clock ratios on a shared 2-core VM move by +-30% from one round to
# the next (see bench/RESULTS.md).  Instruction counts do not: this script
# runs the server and psql under valgrind's callgrind, which counts every
# instruction executed, and reports for one COPY TO and one COPY FROM of
# SSLR_INSN_MB megabytes over TLS 1.3 the instructions of the backend and of
# psql, per configuration, as ratios to stock TLS (no extension).
#
# Run as root (like the other scripts); needs valgrind (installed by
# scripts/setup.sh).  Takes a few minutes.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../scripts/valgrind_cluster.sh"

if [ -z "${SSLR_INSN_INNER:-}" ]; then
    sslr_rerun_as_postgres bench/instructions.sh SSLR_INSN_INNER SSLR_INSN_MB="${SSLR_INSN_MB:-20}"
fi

MB=${SSLR_INSN_MB:-20}
T=$(mktemp -d /tmp/sslr-insn.XXXXXX)
PORT=56500
cleanup() {
    pg_ctl -D "$T/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT

sslr_make_test_cluster

# One configuration: server (with or without the library) under callgrind,
# psql under callgrind, one COPY TO and one COPY FROM; prints
# "backend_to psql_to backend_from psql_from" instruction counts.
measure() {
    local preload=$1 options=$2 cg=$T/cg.$RANDOM
    mkdir "$cg"
    sed -i "/^shared_preload_libraries/d" "$T/data/postgresql.conf"
    [ -n "$preload" ] && echo "shared_preload_libraries = '$preload'" >>"$T/data/postgresql.conf"
    # A forked child inherits callgrind's counts of its parent: without
    # --zero-before every backend would also carry the postmaster's start-up
    # (for us, _PG_init's 1.8 M instructions, mostly PostgreSQL re-sorting
    # its GUC array for each custom variable).  pq_init is the first thing a
    # backend does after the fork; the postmaster never calls it.
    valgrind --tool=callgrind --trace-children=yes --collect-atstart=yes \
        --zero-before=pq_init --callgrind-out-file="$cg/server.%p" \
        postgres -D "$T/data" >"$T/server.log" 2>&1 &
    sslr_wait_ready
    psql -X -q -h "$T" -p $PORT -d postgres -c 'TRUNCATE t2' -c 'CHECKPOINT'
    local conn="host=127.0.0.1 port=$PORT dbname=postgres sslmode=require ssl_min_protocol_version=TLSv1.3 gssencmode=disable"
    [ -n "$options" ] && conn="$conn options='$options'"
    for dir in to from; do
        local cmd pidfile=$cg/pid.$dir
        if [ $dir = to ]; then cmd="\\copy t to '/dev/null'"; else cmd="\\copy t2 from '$T/t.copy'"; fi
        valgrind --tool=callgrind --callgrind-out-file="$cg/psql.$dir" \
            psql -X -q -At -d "$conn" -c "SELECT pg_backend_pid()" -c "$cmd" \
            >"$pidfile" 2>"$cg/psql.$dir.err"
    done
    pg_ctl -D "$T/data" -m fast -w stop >/dev/null
    wait
    local out=""
    for dir in to from; do
        local pid
        pid=$(head -n 1 "$cg/pid.$dir")
        out="$out $(callgrind_annotate "$cg/server.$pid" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')"
        out="$out $(callgrind_annotate "$cg/psql.$dir" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')"
    done
    rm -rf "$cg"
    echo "$out"
}

declare -A result
configs=("c|TLS 1.3, no extension||"
         "d|TLS 1.3, accounting only (limit 0)|ssl_renegotiate|-c ssl_renegotiate.byte_limit=0"
         "e|TLS 1.3, limit 64kB|ssl_renegotiate|-c ssl_renegotiate.byte_limit=64kB"
         "f|TLS 1.3, limit 640kB|ssl_renegotiate|-c ssl_renegotiate.byte_limit=640kB"
         "g|TLS 1.3, limit 512MB (default)|ssl_renegotiate|")
for c in "${configs[@]}"; do
    IFS='|' read -r key _ preload options <<<"$c"
    result[$key]=$(measure "$preload" "$options")
done

{
    echo "Instructions executed (valgrind callgrind), COPY of $MB MB of text over TLS 1.3, $(date -u '+%Y-%m-%d %H:%M UTC')"
    printf '%-38s %16s %8s %16s %8s %16s %8s %16s %8s\n' configuration \
        "backend COPY TO" ratio "psql COPY TO" ratio "backend FROM" ratio "psql FROM" ratio
    read -r b_to p_to b_from p_from <<<"${result[c]}"
    for c in "${configs[@]}"; do
        IFS='|' read -r key name _ _ <<<"$c"
        read -r x1 x2 x3 x4 <<<"${result[$key]}"
        awk -v n="($key) $name" -v x1="$x1" -v x2="$x2" -v x3="$x3" -v x4="$x4" \
            -v r1="$b_to" -v r2="$p_to" -v r3="$b_from" -v r4="$p_from" 'BEGIN {
                printf "%-38s %16s %8.4f %16s %8.4f %16s %8.4f %16s %8.4f\n", n,
                    x1, x1 / r1, x2, x2 / r2, x3, x3 / r3, x4, x4 / r4 }'
    done
} | tee "$T/result.txt"
