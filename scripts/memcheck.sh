#!/usr/bin/env bash
# memcheck.sh -- the server under valgrind's memcheck while TLS sessions
# copy data with key rotation: TLS 1.3 at 64 kB both ways, TLS 1.2 with
# renegotiation, a KeyUpdate-free reset of the totals and reads of the
# views.  Fails if memcheck reports an error in a stack that goes through
# ssl_renegotiate.so (errors elsewhere in an uninstrumented PostgreSQL are
# printed as a count, not judged).
#
# Run as root; needs valgrind (scripts/setup.sh installs it).  A few minutes.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/valgrind_cluster.sh"

if [ -z "${SSLR_MC_INNER:-}" ]; then
    sslr_rerun_as_postgres scripts/memcheck.sh SSLR_MC_INNER SSLR_MC_MB="${SSLR_MC_MB:-4}"
fi

MB=${SSLR_MC_MB:-4}
T=$(mktemp -d /tmp/sslr-memcheck.XXXXXX)
PORT=56510
cleanup() {
    pg_ctl -D "$T/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT

sslr_make_test_cluster

echo "shared_preload_libraries = 'ssl_renegotiate'" >>"$T/data/postgresql.conf"
echo "ssl_renegotiate.tls12 = 'renegotiate'" >>"$T/data/postgresql.conf"
mkdir "$T/vg"
valgrind --tool=memcheck --trace-children=yes --error-limit=no \
    --num-callers=30 --log-file="$T/vg/mc.%p" \
    postgres -D "$T/data" >"$T/server.log" 2>&1 &
sslr_wait_ready
psql -X -q -h "$T" -p $PORT -d postgres -c 'CREATE EXTENSION ssl_renegotiate'

for tls in TLSv1.3 TLSv1.2; do
    conn="host=127.0.0.1 port=$PORT dbname=postgres sslmode=require ssl_min_protocol_version=$tls ssl_max_protocol_version=$tls gssencmode=disable options='-c ssl_renegotiate.byte_limit=64kB'"
    echo "== $tls, limit 64kB: COPY TO and COPY FROM of $MB MB"
    psql -X -q -At -d "$conn" -c 'TRUNCATE t2' -c "\\copy t to '$T/out.copy'" \
        -c "\\copy t2 from '$T/t.copy'" \
        -c 'SELECT version, rekeys_sent, rekeys_received, rekey_failures FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid()'
    cmp "$T/t.copy" "$T/out.copy"
done
psql -X -q -At -h "$T" -p $PORT -d postgres \
    -c 'SELECT count(*) FROM ssl_renegotiate_activity' \
    -c 'SELECT connections, rekeys_sent > 0 FROM ssl_renegotiate_totals' \
    -c 'SELECT ssl_renegotiate_reset()'
pg_ctl -D "$T/data" -m fast -w stop >/dev/null
wait

# memcheck's error kinds, as the first line of each error record
errors='^==[0-9]*== \(Invalid\|Conditional jump\|Use of uninitialised\|Syscall param\|Mismatched\|Source and destination overlap\)'
ours=0
all=0
for f in "$T"/vg/mc.*; do
    n=$(grep -c "$errors" "$f" || true)
    all=$((all + n))
    if grep -q 'ssl_renegotiate.so' "$f"; then
        # print the error records whose stack goes through our library
        awk '/^==[0-9]+== (Invalid|Conditional|Use of uninit|Syscall param|Mismatched|Source and dest)/ {rec=""; inerr=1}
             inerr {rec = rec $0 "\n"}
             inerr && /^==[0-9]+== $/ {if (rec ~ /ssl_renegotiate\.so/) {printf "%s", rec; found++}; inerr=0}
             END {exit found ? 1 : 0}' "$f" || ours=$((ours + 1))
    fi
done
if [ "$all" -gt 0 ]; then
    echo "memcheck: error records elsewhere (first lines; PostgreSQL is not built for valgrind, so some are expected):"
    grep -h -A4 "$errors" "$T"/vg/mc.* |
        sed 's/^==[0-9]*== //' | head -40
fi
echo "memcheck: $all error records in all server processes; processes with an error in ssl_renegotiate.so: $ours"
[ "$ours" -eq 0 ]
