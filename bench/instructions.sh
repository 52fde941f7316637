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

PG_BINDIR=/usr/lib/postgresql/15/bin

if [ -z "${SSLR_INSN_INNER:-}" ]; then
    [ "$(id -u)" -eq 0 ] || { echo "instructions.sh: run as root" >&2; exit 1; }
    HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    WORKDIR=$(bash "$HERE/../scripts/setup.sh" | tail -n 1)
    exec runuser -u postgres -- env -C /tmp -u PGHOST -u PGPORT -u PGOPTIONS \
        -u PGSSLMODE -u PGDATABASE -u PGUSER \
        SSLR_INSN_INNER=1 PATH="$PG_BINDIR:$PATH" \
        SSLR_INSN_MB="${SSLR_INSN_MB:-20}" \
        SSLR_INSN_OUT="$WORKDIR/bench/results/instructions.txt" \
        bash "$WORKDIR/bench/instructions.sh"
fi

MB=${SSLR_INSN_MB:-20}
T=$(mktemp -d /tmp/sslr-insn.XXXXXX)
PORT=56500
cleanup() {
    pg_ctl -D "$T/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -keyout "$T/server.key" -out "$T/server.crt" 2>/dev/null
chmod 600 "$T/server.key"
initdb -D "$T/data" -A trust >/dev/null
cat >>"$T/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$T'
ssl = on
ssl_cert_file = '$T/server.crt'
ssl_key_file = '$T/server.key'
fsync = off
synchronous_commit = off
autovacuum = off
EOF

# Load the data once, without valgrind.
pg_ctl -D "$T/data" -l "$T/plain.log" -w start >/dev/null
rows=$((MB * 1000 * 1000 / 120))
psql -X -q -h "$T" -p $PORT -d postgres <<EOF
CREATE TABLE t AS
  SELECT g AS id, md5(g::text) AS a, (g * 1.37)::numeric(14,2) AS b,
         timestamptz '2003-04-10' + g * interval '1 s' AS c, repeat('x', g % 17) AS d
  FROM generate_series(1, $rows) g;
CREATE TABLE t2 (LIKE t);
-- set hint bits now, or the first configuration measured pays for them
VACUUM FREEZE t;
\copy t to '$T/t.copy'
EOF
pg_ctl -D "$T/data" -w stop >/dev/null

# One configuration: server (with or without the library) under callgrind,
# psql under callgrind, one COPY TO and one COPY FROM; prints
# "backend_to psql_to backend_from psql_from" instruction counts.
measure() {
    local preload=$1 options=$2 cg=$T/cg.$RANDOM
    mkdir "$cg"
    sed -i "/^shared_preload_libraries/d" "$T/data/postgresql.conf"
    [ -n "$preload" ] && echo "shared_preload_libraries = '$preload'" >>"$T/data/postgresql.conf"
    valgrind --tool=callgrind --trace-children=yes --collect-atstart=yes \
        --callgrind-out-file="$cg/server.%p" \
        postgres -D "$T/data" >"$T/server.log" 2>&1 &
    for _ in $(seq 1 600); do
        pg_isready -q -h "$T" -p $PORT && break
        sleep 0.2
    done
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
         "d|TLS 1.3, accounting only (limit 0)|ssl_renegotiate|-c ssl_renegotiate.limit=0"
         "e|TLS 1.3, limit 64kB|ssl_renegotiate|-c ssl_renegotiate.limit=64kB"
         "f|TLS 1.3, limit 640kB|ssl_renegotiate|-c ssl_renegotiate.limit=640kB"
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
cp "$T/result.txt" "${SSLR_INSN_OUT:-/dev/null}" 2>/dev/null || true
