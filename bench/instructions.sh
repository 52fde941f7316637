#!/usr/bin/env bash
# instructions.sh -- what accounting and rotation cost, in CPU instructions.
#
# Wall-clock ratios on a shared 2-core VM move by +-30% from one round to
# the next (see bench/RESULTS.md).  Instruction counts do not: this script
# runs the server and psql under valgrind's callgrind, which counts every
# instruction executed, and reports for one COPY TO and one COPY FROM of
# SSLR_INSN_MB megabytes over TLS the instructions of the backend and of
# psql, per configuration, as ratios to stock TLS 1.3 (no extension).
#
# Then the price of one rotation with the OpenSSL the server and psql use:
# instructions per TLS 1.3 KeyUpdate and per abbreviated TLS 1.2
# renegotiation, on each side, from the slope between two limits (64 kB and
# 640 kB: what does not depend on the number of rotations, such as TLS 1.2's
# first, full handshake, cancels out), next to bench/floor.c's count of the
# cryptography one key update needs in itself.
#
# For another PostgreSQL or OpenSSL: SSLR_PG_CONFIG=.../bin/pg_config (a
# build of scripts/pg_build.sh; its psql and libpq use the same OpenSSL).
# SSLR_INSN_CONFIGS picks configurations (default: all).
#
# Run as root (like the other scripts); needs valgrind (installed by
# scripts/setup.sh).  Takes 2-5 minutes.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../scripts/valgrind_cluster.sh"

if [ -z "${SSLR_INSN_INNER:-}" ]; then
    SSLR_WORKDIR=${SSLR_WORKDIR:-/tmp/ssl_renegotiate-insn} \
        sslr_rerun_as_postgres bench/instructions.sh SSLR_INSN_INNER SSLR_INSN_MB="${SSLR_INSN_MB:-20}" \
        SSLR_INSN_CONFIGS="${SSLR_INSN_CONFIGS:-}"
fi
export PATH="$PG_BINDIR:$PATH"

MB=${SSLR_INSN_MB:-20}
T=$(mktemp -d /tmp/sslr-insn.XXXXXX)
PORT=56500
cleanup() {
    pg_ctl -D "$T/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT

sslr_make_test_cluster

# Rotations so far in the totals, which take in a session when its backend
# has exited: "sent received" ("0 0" without the extension).  A TLS 1.3
# KeyUpdate of the server's key counts as one sent; a TLS 1.2
# renegotiation, which changes both keys, as one each way.
rotations_total() {
    [ -n "$1" ] || { echo 0 0; return; }
    psql -X -At -F' ' -h "$T" -p $PORT -d postgres -c 'SELECT rekeys_sent, rekeys_received FROM ssl_renegotiate_totals'
}

# One configuration: server (with or without the library) under callgrind,
# psql under callgrind, one COPY TO and one COPY FROM; prints
# "backend_to psql_to backend_from psql_from" instruction counts, then
# the rotations "sent_to received_to sent_from received_from".
measure() {
    local preload=$1 options=$2 tls=$3 cg=$T/cg.$RANDOM seen now
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
    [ -n "$preload" ] && psql -X -q -h "$T" -p $PORT -d postgres -c 'SET client_min_messages = warning' \
        -c 'CREATE EXTENSION IF NOT EXISTS ssl_renegotiate'
    local conn="host=127.0.0.1 port=$PORT dbname=postgres sslmode=require gssencmode=disable"
    conn="$conn ssl_min_protocol_version=TLSv$tls ssl_max_protocol_version=TLSv$tls"
    seen=$(rotations_total "$preload")
    [ -n "$options" ] && conn="$conn options='$options'"
    for dir in to from; do
        local cmd pidfile=$cg/pid.$dir
        if [ $dir = to ]; then cmd="\\copy t to '/dev/null'"; else cmd="\\copy t2 from '$T/t.copy'"; fi
        valgrind --tool=callgrind --callgrind-out-file="$cg/psql.$dir" \
            psql -X -q -At -d "$conn" -c "SELECT pg_backend_pid()" -c "$cmd" \
            >"$pidfile" 2>"$cg/psql.$dir.err"
        while kill -0 "$(head -n 1 "$pidfile")" 2>/dev/null; do sleep 0.2; done
        now=$(rotations_total "$preload")
        echo "$now $seen" | awk '{ print $1 - $3, $2 - $4 }' >"$cg/rot.$dir"
        seen=$now
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
    out="$out $(cat "$cg/rot.to") $(cat "$cg/rot.from")"
    rm -rf "$cg"
    echo "$out"
}

declare -A result
# 2003's pace: a new key at every limit (a developer's setting; the
# default min_rekey_gap allows one a second, which (p) measures)
PACE03="-c ssl_renegotiate.debug_min_rekey_gap=0"
RENEGOTIATE="$PACE03 -c ssl_renegotiate.tls12=renegotiate -c ssl_renegotiate.byte_limit"
all_configs=("c|TLS 1.3, no extension||1.3|"
         "d|TLS 1.3, accounting only (limit 0)|ssl_renegotiate|1.3|-c ssl_renegotiate.byte_limit=0"
         "e|TLS 1.3, limit 64kB|ssl_renegotiate|1.3|$PACE03 -c ssl_renegotiate.byte_limit=64kB"
         "p|TLS 1.3, limit 64kB, paced (gap 1s)|ssl_renegotiate|1.3|-c ssl_renegotiate.byte_limit=64kB"
         "f|TLS 1.3, limit 640kB|ssl_renegotiate|1.3|$PACE03 -c ssl_renegotiate.byte_limit=640kB"
         "g|TLS 1.3, limit 512MB (default)|ssl_renegotiate|1.3|"
         "c12|TLS 1.2, no extension||1.2|"
         "h64|TLS 1.2 renegotiation, limit 64kB|ssl_renegotiate|1.2|$RENEGOTIATE=64kB"
         "h640|TLS 1.2 renegotiation, limit 640kB|ssl_renegotiate|1.2|$RENEGOTIATE=640kB")
configs=()
for c in "${all_configs[@]}"; do    # (c) is the reference: always measured
    case " c ${SSLR_INSN_CONFIGS:-${c%%|*}} " in *" ${c%%|*} "*) configs+=("$c") ;; esac
done
for c in "${configs[@]}"; do
    IFS='|' read -r key _ preload tls options <<<"$c"
    result[$key]=$(measure "$preload" "$options" "$tls")
done

# bench/floor.c with the libcrypto the server uses (found through ldd)
libcrypto=$(ldd "$PG_BINDIR/postgres" | awk '/libcrypto/ { print $3 }')
cc_flags=(-O2 -Wall -Wextra -Werror)
case "$libcrypto" in
    /usr/lib/*) ;;  # the system's
    *) prefix=$(dirname "$(dirname "$libcrypto")")
       # shellcheck disable=SC2054 # -Wl,-rpath,DIR: the commas are the linker's
       cc_flags+=(-I"$prefix/include" -L"$(dirname "$libcrypto")" -Wl,-rpath,"$(dirname "$libcrypto")") ;;
esac
gcc "${cc_flags[@]}" -o "$T/floor" "$(dirname "${BASH_SOURCE[0]}")/floor.c" -lcrypto
floor_count() {
    valgrind --tool=callgrind --toggle-collect=floor_update --callgrind-out-file="$T/floor.cg" \
        "$T/floor" "$1" >"$T/floor.out" 2>/dev/null
    callgrind_annotate "$T/floor.cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
floor=$(( ($(floor_count 1100) - $(floor_count 100)) / 1000 ))

{
    echo "Instructions executed (valgrind callgrind), COPY of $MB MB of text, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "PostgreSQL $("$PG_BINDIR/pg_config" --version | awk '{ print $2 }'), $(sed 's/ ([0-9a-f]*)$//' "$T/floor.out") ($libcrypto)"
    printf '%-38s %16s %8s %16s %8s %16s %8s %16s %8s  %s\n' configuration \
        "backend COPY TO" ratio "psql COPY TO" ratio "backend FROM" ratio "psql FROM" ratio \
        "rotations sent/received: TO FROM"
    read -r b_to p_to b_from p_from _ <<<"${result[c]}"
    for c in "${configs[@]}"; do
        IFS='|' read -r key name _ _ _ <<<"$c"
        read -r x1 x2 x3 x4 s_to r_to s_from r_from <<<"${result[$key]}"
        awk -v n="($key) $name" -v x1="$x1" -v x2="$x2" -v x3="$x3" -v x4="$x4" \
            -v r1="$b_to" -v r2="$p_to" -v r3="$b_from" -v r4="$p_from" -v rot="$s_to/$r_to $s_from/$r_from" 'BEGIN {
                printf "%-38s %16s %8.4f %16s %8.4f %16s %8.4f %16s %8.4f  %s\n", n,
                    x1, x1 / r1, x2, x2 / r2, x3, x3 / r3, x4, x4 / r4, rot }'
    done
    echo
    # instructions per rotation of the server's key in COPY TO: the slope
    # between two limits
    per_rotation() { # label many few
        [ -n "${result[$2]:-}" ] && [ -n "${result[$3]:-}" ] || return 0
        read -r m_b m_p _ _ m_r _ <<<"${result[$2]}"
        read -r f_b f_p _ _ f_r _ <<<"${result[$3]}"
        awk -v l="$1" -v mb="$m_b" -v mp="$m_p" -v mr="$m_r" -v fb="$f_b" -v fp="$f_p" -v fr="$f_r" 'BEGIN {
            if (mr == fr) { printf "%-44s (no difference in rotations)\n", l; exit }
            printf "%-44s server %8.0f   client %8.0f   (%d - %d rotations)\n", l,
                (mb - fb) / (mr - fr), (mp - fp) / (mr - fr), mr, fr }'
    }
    per_rotation "per TLS 1.3 KeyUpdate (e vs f)" e f
    per_rotation "per TLS 1.2 renegotiation, resumed (h64 vs h640)" h64 h640
    printf '%-44s %8d   (bench/floor.c: HKDF-Expand-Label x 3 + AES-256-GCM key set-up)\n' \
        "floor of one key update" "$floor"
    if [ -n "${result[d]:-}" ]; then
        read -r d_b _ <<<"${result[d]}"
        awk -v d="$d_b" -v c="$b_to" 'BEGIN { printf "%-44s %+.2f %% of the backend, COPY TO\n", "accounting only (d vs c)", (d - c) * 100 / c }'
    fi
} | tee "$T/result.txt"
