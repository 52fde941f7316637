#!/usr/bin/env bash
# patroni_test.sh [PG_BINDIR | PG_CONFIG] -- a Patroni cluster over TLS
# with the extension on every node, through the SIGKILL of its leader.
# Run as root; scripts/test.sh runs it after the Debian package test, on
# Debian's PostgreSQL 15 (the default here: /usr/lib/postgresql/15/bin),
# where its cell has installed the extension.
#
# Debian's patroni 3.0.2 and etcd-server 3.4 (scripts/packages.sh,
# installed with no service started) run one etcd member and three
# PostgreSQL nodes, all on 127.0.0.1 and free ports (reserved as the TAP
# tests reserve theirs: PG_TEST_PORT_DIR), in a work directory of the run's
# own (SSLR_PATRONI_WORKDIR, which it leaves for inspection, or else mktemp
# -d /tmp/ssl_renegotiate-patroni.XXXXXX, removed), as user postgres; the
# nodes' configuration is scripts/patroni/node.yml.in: the extension in
# shared_preload_libraries, ssl = on with certificates made now
# (scripts/make_certs.sh), byte_limit = 64kB, replication and pg_rewind
# over TLS with sslmode=verify-ca, synchronous_mode, primary_start_timeout
# = 0.  Then:
#   1. a client (scripts/patroni/writer.py) writes numbered rows to the
#      leader over TLS and records each one acknowledged;
#   2. mid-load, the leader is cut off from its sync standby (that
#      walsender stopped: the writer's COMMIT waits; WAL the sync standby
#      never gets reaches the async replica), then its postmaster (and that
#      walsender) killed with SIGKILL; Patroni promotes the sync standby
#      and rewinds the old leader and the async replica (pg_rewind, over
#      TLS), which follow it; the client reconnects to the new leader
#      (REST API) and goes on;
#   3. the new leader's walsenders: one activity row each; both directions
#      rotate under load; ssl_renegotiate_rekey() on a walsender and on the
#      writer's backend is carried out; in a quiet window with WAL written
#      over the Unix socket, each walsender row equals the kernel's counts
#      for its socket, and the totals grew by exactly what the walsenders
#      carried (no double count);
#   4. every acknowledged row is on every node;
#   5. each node's totals are its own: no negative figure anywhere; the
#      replicas' totals count only this test's TLS sessions to them (never
#      a walreceiver); the promoted node kept its totals through promotion;
#      the killed node's and the rewound replica's started again from zero
#      (a crash; pg_rewind), and a clean restart (patronictl restart) of
#      each node keeps them, exactly where nothing else moves;
#   6. each query of monitoring/queries.yaml reads every node (psql, as a
#      member of pg_monitor).
# Each check prints "patroni check ok: WHAT" or "patroni check FAILED:
# WHAT" (test.sh counts them), then the figures and the line "Patroni
# cluster: N passed, N failed".  Everything started is stopped however the
# test ends (a last check: no process of the run is left); nothing of the
# machine's is touched.  The exit status is non-zero if a check failed.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
. "$SSLR_REPO/scripts/packages.sh"

# ===================================================================== root
if [ -z "${SSLR_PATRONI_INNER:-}" ]; then
    sslr_require_root patroni_test.sh
    bindir=${1:-/usr/lib/postgresql/15/bin}
    [ "${bindir##*/}" != pg_config ] || bindir=$(dirname "$bindir")
    [ -x "$bindir/postgres" ] && [ -x "$bindir/pg_config" ] ||
        { echo "patroni_test.sh: no PostgreSQL in $bindir" >&2; exit 1; }
    PG_BINDIR=$bindir
    # shellcheck disable=SC2086 # a list of words; quiet when all are there
    sslr_install_packages $SSLR_PATRONI_PACKAGES 2>/dev/null
    lib=$("$bindir/pg_config" --pkglibdir)/ssl_renegotiate.so
    [ -f "$lib" ] || { echo "patroni_test.sh: $lib is missing: install the extension first" >&2; exit 1; }

    MARKER=.ssl_renegotiate-patroni-workdir
    T=${SSLR_PATRONI_WORKDIR:-}
    if [ -n "$T" ]; then
        case "$T" in /?*) ;; *) echo "patroni_test.sh: SSLR_PATRONI_WORKDIR must be absolute" >&2; exit 1 ;; esac
        if [ -e "$T" ]; then
            [ -f "$T/$MARKER" ] || { echo "patroni_test.sh: $T was not made by patroni_test.sh" >&2; exit 1; }
            rm -rf "$T"
        fi
        mkdir -p "$T"
    else
        T=$(mktemp -d /tmp/ssl_renegotiate-patroni.XXXXXX)
    fi
    chmod 755 "$T"
    touch "$T/$MARKER"
    # Processes of this run: those whose command line or working directory
    # is in its directory (etcd, Patroni, the writer, every PostgreSQL
    # process of its nodes), and no other.
    run_processes() {
        local p c d
        for p in /proc/[0-9]*; do
            c=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
            d=$(readlink "$p/cwd" 2>/dev/null) || d=
            case "$c $d/" in *"$T/"*) echo "${p#/proc/} $c" ;; esac
        done
    }
    outer_cleanup() {
        local rc=$? pids
        trap - EXIT
        pids=$(run_processes | awk '{ print $1 }')
        # shellcheck disable=SC2086
        [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
        if [ -n "${SSLR_PATRONI_WORKDIR:-}" ]; then
            # the logs stay; the data directories are big
            rm -rf "$T"/node*/data "$T/etcd/data"
        else
            rm -rf "$T"
        fi
        exit "$rc"
    }
    trap outer_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # what the postgres part reads, as in the tree
    mkdir -p "$T/tree/scripts/patroni" "$T/tree/monitoring"
    cp "$SSLR_REPO"/scripts/{patroni_test,common,packages,make_certs}.sh "$T/tree/scripts/"
    cp "$SSLR_REPO"/scripts/patroni/*.py "$SSLR_REPO"/scripts/patroni/*.in "$T/tree/scripts/patroni/"
    cp "$SSLR_REPO/monitoring/queries.yaml" "$T/tree/monitoring/"
    chown -R postgres:postgres "$T"
    port_dir=${PG_TEST_PORT_DIR:-/tmp/ssl_renegotiate-patroni-ports}
    mkdir -p "$port_dir"
    [ -n "${PG_TEST_PORT_DIR:-}" ] || chmod 1777 "$port_dir"

    set +e
    sslr_as_postgres "$T" SSLR_PATRONI_INNER=1 SSLR_PATRONI_BINDIR="$bindir" T="$T" PG_TEST_PORT_DIR="$port_dir" \
        bash "$T/tree/scripts/patroni_test.sh" 2>&1 | tee "$T/test.log"
    rc=${PIPESTATUS[0]}
    set -e
    left=$(run_processes)
    if [ -z "$left" ]; then
        echo "patroni check ok: no process of the run is left (etcd, Patroni, PostgreSQL, the writer)"
    else
        echo "patroni check FAILED: no process of the run is left; still running:"
        printf '    %s\n' "$left"
    fi
    passed=$(grep -c '^patroni check ok: ' "$T/test.log" || true)
    failed=$(grep -c '^patroni check FAILED: ' "$T/test.log" || true)
    [ -z "$left" ] && passed=$((passed + 1)) || failed=$((failed + 1))
    [ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
    echo "Patroni cluster: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
fi

# ================================================================ postgres
PG_BINDIR=$SSLR_PATRONI_BINDIR
export PATH="$PG_BINDIR:$PATH" PAGER=cat PSQL_PAGER=cat LC_ALL=C
TREE=$SSLR_REPO/scripts/patroni
NODES="node1 node2 node3"
START=$SECONDS

failures=0
SSLR_CHECK_KIND=patroni
check() { sslr_check "$@"; }
# A step the later ones need: stop here if it failed.
require() {
    local before=$failures
    check "$@"
    [ "$failures" -eq "$before" ] || { echo "patroni_test.sh: stopped after '$1'"; exit 1; }
}
note() { printf -- '--> %s\n' "$*"; }
elapsed() { echo "$((SECONDS - START)) s"; }
# wait_for SECONDS COMMAND...: until it succeeds, polling every 0.2 s
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# ------------------------------------------------------------ clean-up
WRITER_PID='' ETCD_PID=''
declare -A PATRONI_PID=()
RESERVED=()
cleanup() {
    local rc=$? n p
    trap - EXIT
    # a walsender stopped for the cut-off must be able to exit
    [ -z "${SYNC_WALSENDER:-}" ] || kill -CONT "$SYNC_WALSENDER" 2>/dev/null || true
    if [ -n "$WRITER_PID" ]; then
        touch "$T/writer/stop"
        kill "$WRITER_PID" 2>/dev/null || true
    fi
    # Patroni stops its PostgreSQL (fast) when it is sent SIGTERM
    for n in "${!PATRONI_PID[@]}"; do kill "${PATRONI_PID[$n]}" 2>/dev/null || true; done
    for _ in $(seq 150); do
        p=
        for n in "${!PATRONI_PID[@]}"; do kill -0 "${PATRONI_PID[$n]}" 2>/dev/null && p=1; done
        [ -n "$p" ] || break
        sleep 0.2
    done
    for n in "${!PATRONI_PID[@]}"; do kill -9 "${PATRONI_PID[$n]}" 2>/dev/null || true; done
    for n in $NODES; do
        [ ! -f "$T/$n/data/postmaster.pid" ] ||
            pg_ctl -D "$T/$n/data" -m immediate -w stop >/dev/null 2>&1 || true
    done
    if [ -n "$ETCD_PID" ]; then
        kill "$ETCD_PID" 2>/dev/null || true
        wait "$ETCD_PID" 2>/dev/null || true
    fi
    [ -z "$WRITER_PID" ] || kill -9 "$WRITER_PID" 2>/dev/null || true
    for p in "${RESERVED[@]}"; do rm -f "$PG_TEST_PORT_DIR/$p.rsv"; done
    if [ "$rc" -ne 0 ] || [ "$failures" -ne 0 ]; then
        for f in "$T"/node*/log/* "$T"/etcd/log/* "$T"/writer/events; do
            [ -f "$f" ] || continue
            echo "----- tail of $f -----"
            tail -n 40 "$f"
        done
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------ ports
# Eight free ports, reserved the way PostgreSQL's TAP tests reserve theirs
# (PG_TEST_PORT_DIR/PORT.rsv holding a live pid, under flock), from their
# range, below the kernel's ephemeral ports: no other test or run takes them.
reserve_port() {
    local p=$1 f=$PG_TEST_PORT_DIR/$1.rsv fd holder
    [ -z "$(ss -Hltn "( sport = :$p )" 2>/dev/null)" ] || return 1
    exec {fd}<>"$f" || return 1
    flock -x "$fd"
    read -r holder <&"$fd" || holder=0
    if [ "${holder:-0}" -gt 0 ] 2>/dev/null && kill -0 "$holder" 2>/dev/null; then
        exec {fd}>&-
        return 1
    fi
    printf '%10d\n' "$$" >"$f"
    exec {fd}>&-
    RESERVED+=("$p")
}
PORTS=()
p=$((10200 + RANDOM % 22000))
while [ "${#PORTS[@]}" -lt 8 ]; do
    p=$((p >= 32767 ? 10200 : p + 1))
    if reserve_port "$p"; then PORTS+=("$p"); fi
done
ETCD_PORT=${PORTS[0]} ETCD_PEER_PORT=${PORTS[1]}
declare -A PG_PORT=([node1]=${PORTS[2]} [node2]=${PORTS[3]} [node3]=${PORTS[4]})
declare -A REST_PORT=([node1]=${PORTS[5]} [node2]=${PORTS[6]} [node3]=${PORTS[7]})
REST_PORTS="${REST_PORT[node1]} ${REST_PORT[node2]} ${REST_PORT[node3]}"
note "ports: etcd ${ETCD_PORT}, PostgreSQL ${PG_PORT[node1]} ${PG_PORT[node2]} ${PG_PORT[node3]}, REST $REST_PORTS"

# ------------------------------------------------------ certificates, etcd
C=$T/certs
bash "$SSLR_REPO/scripts/make_certs.sh" "$C" "ssl_renegotiate Patroni test CA" >"$T/openssl.log" 2>&1 ||
    { cat "$T/openssl.log"; exit 1; }
mkdir -p "$T/etcd/log" "$T/writer"
cp "$C/ca.crt" "$T/writer/"
echo "$REST_PORTS" >"$T/writer/rest_ports"
SUPER_PASSWORD=$(openssl rand -hex 12)
REPL_PASSWORD=$(openssl rand -hex 12)
APP_PASSWORD=$(openssl rand -hex 12)
echo "$APP_PASSWORD" >"$T/writer/app_password"

etcd --name sslr --data-dir "$T/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "sslr=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
    >"$T/etcd/log/etcd.log" 2>&1 &
ETCD_PID=$!
etcd_healthy() { python3 -c "import sys, urllib.request; sys.exit(b'true' not in urllib.request.urlopen('http://127.0.0.1:$ETCD_PORT/health', timeout=1).read())" 2>/dev/null; }
require "etcd $(etcd --version | awk '/etcd Version/ { print $3 }') answers on 127.0.0.1:$ETCD_PORT" wait_for 30 etcd_healthy

# ------------------------------------------------------------ the nodes
for n in $NODES; do
    mkdir -p "$T/$n/log"
    sed -e "s|@NAME@|$n|g" -e "s|@REST_PORT@|${REST_PORT[$n]}|g" -e "s|@PG_PORT@|${PG_PORT[$n]}|g" \
        -e "s|@ETCD_PORT@|$ETCD_PORT|g" -e "s|@NODE_DIR@|$T/$n|g" -e "s|@CERTS@|$C|g" \
        -e "s|@PG_BINDIR@|$PG_BINDIR|g" -e "s|@SUPER_PASSWORD@|$SUPER_PASSWORD|g" \
        -e "s|@REPL_PASSWORD@|$REPL_PASSWORD|g" "$TREE/node.yml.in" >"$T/$n/patroni.yml"
done
start_patroni() {
    # /usr/bin/patroni: a python3 first in PATH may lack Patroni's modules
    /usr/bin/patroni "$T/$1/patroni.yml" >>"$T/$1/log/patroni.log" 2>&1 &
    PATRONI_PID[$1]=$!
}
# shellcheck disable=SC2086 # REST_PORTS: one argument per port
members() { python3 "$TREE/cluster.py" $REST_PORTS 2>/dev/null; }
leader() { members | awk '$2 == "leader" && $3 == "running" { print $1 }'; }
# SQL on a node over its Unix socket, as postgres (no TLS: moves no
# counter); fields separated by a space
q() { psql -XAtq -F ' ' -v ON_ERROR_STOP=1 -h "$T/$1" -p "${PG_PORT[$1]}" -U postgres -d postgres -c "$2"; }
streaming() { # streaming NODE N: NODE has N walsenders streaming, one of them sync
    [ "$(q "$1" "SELECT count(*) || ' ' || count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null)" = "$2 1" ]
}
# One leader streaming to two replicas, all running, one of them the sync
# standby in etcd too (only that one may be promoted: Patroni writes it
# there a loop after the leader's synchronous_standby_names names it)
formed() {
    local l
    l=$(leader) && [ -n "$l" ] &&
        [ "$(members | awk '$3 == "running" { n++; s += $2 == "sync_standby" } END { print n, s }')" = "3 1" ] &&
        streaming "$l" 2
}

start_patroni node1
node1_leads() { [ "$(leader)" = node1 ]; }
require "node1 bootstraps the cluster and leads it" wait_for 60 node1_leads
start_patroni node2
start_patroni node3
require "the cluster forms: a leader and two replicas streaming, one of them the sync standby ($(elapsed))" \
    wait_for 120 formed
OLD_LEADER=$(leader)
members | sed 's/^/    /'

# ---------------------------------------------------------- set-up SQL
q "$OLD_LEADER" "CREATE EXTENSION ssl_renegotiate;
    CREATE ROLE app LOGIN PASSWORD '$APP_PASSWORD';
    CREATE ROLE monitor LOGIN IN ROLE pg_monitor;
    CREATE TABLE load (id integer PRIMARY KEY, payload text);
    GRANT SELECT, INSERT ON load TO app;
    CREATE TABLE bulk (id integer, payload text)"
has_extension() { [ "$(q "$1" "SELECT count(*) FROM pg_extension WHERE extname = 'ssl_renegotiate'" 2>/dev/null)" = 1 ]; }
for n in $NODES; do
    check "$n has the extension (replayed on the replicas)" wait_for 30 has_extension "$n"
done

# This test's TLS sessions to each node (counted: a replica's totals must
# hold these and nothing else)
declare -A PROBES=([node1]=0 [node2]=0 [node3]=0)
tls() { # tls NODE SQL: over TLS, as app
    PGPASSWORD=$APP_PASSWORD psql -XAtq -v ON_ERROR_STOP=1 \
        "host=127.0.0.1 port=${PG_PORT[$1]} dbname=postgres user=app sslmode=verify-ca sslrootcert=$C/ca.crt application_name=sslr_probe" \
        -c "$2"
}
probe() { # one TLS session to NODE: its own row, read from a hot standby too
    PROBES[$1]=$((PROBES[$1] + 1))
    [ "$(tls "$1" "SELECT s.ssl, a.bytes_received > 0 FROM pg_stat_ssl s JOIN ssl_renegotiate_activity a USING (pid) WHERE pid = pg_backend_pid()")" = "t|t" ]
}
totals_json() { q "$1" "SELECT to_jsonb(t) FROM ssl_renegotiate_totals t"; }
# "KEY BEFORE -> AFTER, ..." for each number of the totals that is not OP
# its value in the JSON PREV (empty if all are)
totals_not() { # totals_not NODE OP PREV_JSON
    q "$1" "WITH p AS (SELECT '$3'::jsonb AS j), c AS (SELECT to_jsonb(t) AS j FROM ssl_renegotiate_totals t)
            SELECT string_agg(k || ' ' || (p.j ->> k) || ' -> ' || (c.j ->> k), ', ')
            FROM p, c, jsonb_object_keys(p.j) k
            WHERE CASE WHEN jsonb_typeof(p.j -> k) = 'number' THEN NOT ((c.j ->> k)::numeric $2 (p.j ->> k)::numeric) END"
}
totals_keep() { # totals_keep NODE OP PREV_JSON: all numbers OP, stats_reset the same
    local bad
    bad=$(totals_not "$1" "$2" "$3")
    [ "$(q "$1" "SELECT stats_reset = ('$3'::jsonb ->> 'stats_reset')::timestamptz FROM ssl_renegotiate_totals")" = t ] ||
        bad+=" stats_reset $(q "$1" "SELECT stats_reset FROM ssl_renegotiate_totals")"
    [ -z "$bad" ] || { echo "    $1: $bad"; return 1; }
}
# The negative figures of a node's totals, totals per database and role
# and activity rows: "VIEW.COLUMN VALUE" for each
negatives() {
    q "$1" "SELECT v || '.' || e.key, e.value FROM (
              SELECT 'totals' v, to_jsonb(t) j FROM ssl_renegotiate_totals t
              UNION ALL SELECT 'database_role_totals', to_jsonb(d) FROM ssl_renegotiate_database_role_totals d
              UNION ALL SELECT 'activity', to_jsonb(a) FROM ssl_renegotiate_activity a) r, jsonb_each(r.j) e
            WHERE CASE WHEN jsonb_typeof(e.value) = 'number' THEN (e.value)::numeric < 0 END"
}
no_negatives() {
    local n bad=
    for n in $NODES; do bad+=$(negatives "$n" | sed "s/^/    $n: /"); done
    [ -z "$bad" ] || { echo "$bad"; return 1; }
}
connections_are_probes() { # NODE: its totals count this test's TLS sessions, nothing else
    local c
    c=$(q "$1" "SELECT connections FROM ssl_renegotiate_totals")
    [ "$c" = "${PROBES[$1]}" ] && return 0
    echo "    $1: connections $c, this test's TLS sessions ${PROBES[$1]}; per database and role:"
    q "$1" "SELECT dbid, usename, connections, bytes_sent, bytes_received FROM ssl_renegotiate_database_role_totals" | sed 's/^/        /'
    return 1
}
summary_line() { # NODE: its totals in one line
    q "$1" "SELECT format('connections %s, sent %s B / %s rekeys, received %s B / %s rekeys, stats_reset %s',
                          connections, bytes_sent, rekeys_sent, bytes_received, rekeys_received, stats_reset)
            FROM ssl_renegotiate_totals"
}

REPLICAS=$(members | awk '$2 != "leader" { print $1 }')
for n in $REPLICAS; do
    check "a TLS session to the replica $n reads its own row (hot standby)" probe "$n"
done
check "the leader $OLD_LEADER has one activity row per walsender" \
    test "$(q "$OLD_LEADER" "SELECT count(*) FROM pg_stat_replication r JOIN ssl_renegotiate_activity a USING (pid) WHERE a.backend_type = 'walsender'")" = 2
declare -A BEFORE=() BEFORE_LINE=()
for n in $NODES; do
    BEFORE[$n]=$(totals_json "$n")
    BEFORE_LINE[$n]=$(summary_line "$n")
done

# ----------------------------------------------------- load and SIGKILL
: >"$T/writer/acked"
python3 "$TREE/writer.py" "$T/writer" &
WRITER_PID=$!
acked() { wc -l <"$T/writer/acked"; }
acked_at_least() { [ "$(acked)" -ge "$1" ]; }
require "the writer's rows are acknowledged by the leader $OLD_LEADER" wait_for 60 acked_at_least 1000

# the leader's totals just before its end: its last words
KILLED_TOTALS_LINE=$(summary_line "$OLD_LEADER")
SYNC_AT_KILL=$(members | awk '$2 == "sync_standby" { print $1 }')
POSTMASTER=$(head -n 1 "$T/$OLD_LEADER/data/postmaster.pid")
# The sync standby is cut off first: its walsender stopped (SIGSTOP), the
# writer's COMMIT waits for it, unacknowledged, and one more transaction
# (synchronous_commit = local, over the Unix socket: not the writer's)
# makes sure the leader has WAL the sync standby never received, while
# the async replica receives it all.  Then the postmaster (and that
# walsender) are killed.  Patroni promotes the sync standby (in synchronous_mode, only
# it may be), and both the old leader and the async replica have WAL the
# new leader never got: Patroni has to rewind them (pg_rewind, over TLS).
SYNC_WALSENDER=$(q "$OLD_LEADER" "SELECT pid FROM pg_stat_replication WHERE sync_state = 'sync'")
SYNC_STANDBY=$(members | awk '$2 == "sync_standby" { print $1 }')
kill -STOP "$SYNC_WALSENDER"
q "$OLD_LEADER" "SET synchronous_commit = local; INSERT INTO bulk VALUES (0, 'the sync standby never gets this')"
last_acked() { tail -n 1 "$T/writer/acked" | awk '{ print $1 }'; }
commit_waits() { # the writer's next row waits for the sync standby; the async one has it
    local a
    a=$(last_acked)
    [ "$(cat "$T/writer/sent")" = "$((a + 1))" ] &&
        [ "$(q "$OLD_LEADER" "SELECT wait_event FROM pg_stat_activity WHERE application_name = 'sslr_writer'")" = SyncRep ] &&
        [ "$(q "$OLD_LEADER" "SELECT flush_lsn >= pg_current_wal_flush_lsn() FROM pg_stat_replication WHERE sync_state <> 'sync'")" = t ] &&
        [ "$(q "$SYNC_STANDBY" "SELECT pg_last_wal_receive_lsn() < '$(q "$OLD_LEADER" "SELECT pg_current_wal_flush_lsn()")'")" = t ]
}
check "with the sync standby cut off, the writer's COMMIT waits for it, and the async replica has WAL it lacks" \
    wait_for 30 commit_waits
declare -A LOG_LINES=()
for n in $NODES; do LOG_LINES[$n]=$(wc -l <"$T/$n/log/patroni.log"); done
KILL_EPOCH=$(date +%s.%N)
ACKED_AT_KILL=$(acked)
kill -KILL "$POSTMASTER" "$SYNC_WALSENDER"
note "SIGKILL to the postmaster $POSTMASTER of the leader $OLD_LEADER (and its stopped walsender $SYNC_WALSENDER) after $ACKED_AT_KILL acknowledged rows ($(elapsed))"
new_leader() { local l; l=$(leader) && [ -n "$l" ] && [ "$l" != "$OLD_LEADER" ]; }
require "Patroni promotes a replica" wait_for 60 new_leader
NEW_LEADER=$(leader)
PROMOTED_AFTER=$(awk -v k="$KILL_EPOCH" 'BEGIN { printf "%.1f", systime() - k }')
note "$NEW_LEADER leads, about $PROMOTED_AFTER s after the kill"
check "the promoted node $NEW_LEADER was the sync standby at the kill" test "$NEW_LEADER" = "$SYNC_AT_KILL"
acked_on_new() { [ "$(awk -v p="${PG_PORT[$NEW_LEADER]}" '$2 == p' "$T/writer/acked" | wc -l)" -ge "$1" ]; }
require "the writer reconnects to the new leader $NEW_LEADER and its rows are acknowledged" \
    wait_for 60 acked_on_new 300
rejoined() {
    ! kill -0 "$SYNC_WALSENDER" 2>/dev/null &&
    members | awk -v n="$OLD_LEADER" '$1 == n && $2 != "leader" && $3 == "running"' | grep -q . &&
        streaming "$NEW_LEADER" 2
}
require "the old leader $OLD_LEADER rejoins as a replica: $NEW_LEADER streams to both" wait_for 120 rejoined
REJOINED_AFTER=$(awk -v k="$KILL_EPOCH" 'BEGIN { printf "%.1f", systime() - k }')
members | sed 's/^/    /'
# What Patroni did to NODE since the kill, in its words
story() {
    tail -n +"$((LOG_LINES[$1] + 1))" "$T/$1/log/patroni.log" |
        grep -Eo 'Primary crashed. Failing over|doing crash recovery in a single user mode|running pg_rewind from [^ ]+|pg_rewind exit code=[0-9]+|replica has been created using [a-z_]+|[Rr]einitializ[a-z]* [a-z ]*|Local timeline=[0-9]+ lsn=[0-9A-F/]+|primary_timeline=[0-9]+' |
        awk '!seen[$0]++' | paste -sd ';' | sed 's/;/; /g' || true
}
HOW_REJOINED=$(story "$OLD_LEADER")
note "$OLD_LEADER rejoined about $REJOINED_AFTER s after the kill (Patroni: $HOW_REJOINED)"
OTHER=$(for n in $NODES; do [ "$n" = "$OLD_LEADER" ] || [ "$n" = "$NEW_LEADER" ] || echo "$n"; done)
HOW_OTHER=$(story "$OTHER")
note "the other replica $OTHER: ${HOW_OTHER:-Patroni only pointed it at the new leader}"

# ----------------------------------------- the new leader's walsenders
ws_rows() { # "CLIENT_PORT PID REKEYS_SENT REKEYS_RECEIVED" per walsender
    q "$NEW_LEADER" "SELECT r.client_port, a.pid, a.rekeys_sent, a.rekeys_received
                     FROM pg_stat_replication r JOIN ssl_renegotiate_activity a USING (pid) ORDER BY 1"
}
W1=$(ws_rows)
check "the new leader $NEW_LEADER has one activity row per walsender, none twice" \
    test "$(q "$NEW_LEADER" "SELECT count(*) || ' ' || count(DISTINCT a.pid) FROM pg_stat_replication r JOIN ssl_renegotiate_activity a USING (pid)")" = "2 2"

# ssl_renegotiate_rekey: a walsender's and the writer's backend's keys,
# mid-load, both ways (rekey_requested clears once both are done)
rekey_done() { # PID REQUESTS_BEFORE
    [ "$(q "$NEW_LEADER" "SELECT rekey_requests = $2 + 1 AND NOT rekey_requested FROM ssl_renegotiate_activity WHERE pid = $1")" = t ]
}
rekey() { # PID: asked, and carried out both ways
    local before
    before=$(q "$NEW_LEADER" "SELECT rekey_requests FROM ssl_renegotiate_activity WHERE pid = $1")
    [ "$(q "$NEW_LEADER" "SELECT ssl_renegotiate_rekey($1)")" = t ] && wait_for 30 rekey_done "$1" "$before"
}
ws_pid=$(q "$NEW_LEADER" "SELECT pid FROM pg_stat_replication WHERE sync_state = 'sync'")
check "ssl_renegotiate_rekey() on the new leader's sync walsender is carried out both ways" rekey "$ws_pid"
writer_pid=$(q "$NEW_LEADER" "SELECT pid FROM pg_stat_activity WHERE application_name = 'sslr_writer'")
connects_before=$(grep -c ' connected ' "$T/writer/events")
check "ssl_renegotiate_rekey() on the writer's backend is carried out both ways" rekey "$writer_pid"

# Load until each walsender's keys rotated both ways since W1
rotated_both_ways() {
    local now
    now=$(ws_rows)
    # CLIENT_PORT PID SENT RECEIVED (then) PID SENT RECEIVED (now)
    join <(echo "$W1") <(echo "$now") | awk '{ n++; if ($2 == $5 && $6 > $3 && $7 > $4) ok++ } END { exit !(n == 2 && ok == 2) }'
}
check "under load, each walsender of the new leader rotates its keys both ways" wait_for 120 rotated_both_ways
W2=$(ws_rows)
printf '    walsender (client port, pid, rekeys sent, received) %s\n' "${W1//$'\n'/; }" "${W2//$'\n'/; }"
touch "$T/writer/stop"
writer_gone() { ! kill -0 "$WRITER_PID" 2>/dev/null && [ "$(q "$NEW_LEADER" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sslr_writer'")" = 0 ]; }
check "the writer stops, its session ended" wait_for 30 writer_gone
wait "$WRITER_PID" || true
WRITER_PID=
check "the writer's session lived through its rekey: no reconnection after it" \
    test "$(grep -c ' connected ' "$T/writer/events")" = "$connects_before"

# --------------------------------------------------- the quiet window
# The walsenders' sockets as the kernel counts them: "CLIENT_PORT ACKED
# RECEIVED PENDING" (PENDING: bytes queued or not yet acknowledged)
kernel() {
    ss -tinHO state established "( sport = :${PG_PORT[$NEW_LEADER]} )" |
        awk '{ n = split($4, a, ":"); ack = 0; rcv = 0; pend = $1 + $2
               for (i = 5; i <= NF; i++) {
                   split($i, b, ":")
                   if (b[1] == "bytes_acked") ack = b[2]
                   else if (b[1] == "bytes_received") rcv = b[2]
                   else if (b[1] == "unacked" || b[1] == "notsent") pend += b[2]
               }
               print a[n], ack, rcv, pend }' | sort
}
# One reading of the totals and the walsender rows while no byte moves on
# the walsenders' sockets (the kernel's counts the same before and after,
# nothing in flight): "totals FIELDS" and "CLIENT_PORT FIELDS ACKED RECEIVED"
FIELDS="bytes_sent, bytes_received, records_sent, records_received, rekeys_sent, rekeys_received"
quiet_read() {
    local k1 k2 sql
    for _ in $(seq 100); do
        k1=$(kernel)
        sql=$(q "$NEW_LEADER" "SELECT 'totals', $FIELDS FROM ssl_renegotiate_totals
                                UNION ALL
                                SELECT * FROM (SELECT r.client_port::text, $FIELDS
                                               FROM pg_stat_replication r JOIN ssl_renegotiate_activity a USING (pid)
                                               ORDER BY 1) w")
        k2=$(kernel)
        if [ "$k1" = "$k2" ] && awk '$4 != 0 { bad = 1 } END { exit bad }' <<<"$k1"; then
            join <(grep -v '^totals' <<<"$sql" | sort) <(awk '{ print $1, $2, $3 }' <<<"$k1")
            grep '^totals' <<<"$sql"
            return 0
        fi
        sleep 0.05
    done
    return 1
}
rows_equal_kernel() { # READING: bytes_sent = acked - 1, bytes_received = received - 8
    awk '$1 != "totals" { n++; if ($2 == $8 - 1 && $3 == $9 - 8) ok++; else print "    walsender of client port " $1 ": sent " $2 " (kernel acked " $8 "), received " $3 " (kernel " $9 ")" }
         END { exit !(n == 2 && ok == 2) }' <<<"$1"
}
require "a quiet moment on the new leader's walsender sockets" eval 'Q1=$(quiet_read)'
check "each walsender row equals the kernel's counts for its socket (sent = acked - 1, received = received - 8)" \
    rows_equal_kernel "$Q1"
q "$NEW_LEADER" "INSERT INTO bulk SELECT g, repeat(md5(g::text), 32) FROM generate_series(1, 4000) g"
caught_up() {
    [ "$(q "$NEW_LEADER" "SELECT count(*) FROM pg_stat_replication WHERE replay_lsn >= pg_current_wal_lsn()")" = 2 ]
}
check "both replicas replay the 4000 rows written over the Unix socket" wait_for 60 caught_up
require "a second quiet moment" eval 'Q2=$(quiet_read)'
check "each walsender row equals the kernel's counts for its socket, after the WAL of the window" \
    rows_equal_kernel "$Q2"
# Over the window, the only TLS traffic of the new leader was its two
# walsenders': the totals grew by what their rows grew, exactly.
window_exact() {
    # a walsender's line: CLIENT_PORT, 6 fields, ACKED, RECEIVED, twice;
    # the totals': "totals", 6 fields, twice
    join <(echo "$Q1") <(echo "$Q2") | awk '
        { off = $1 == "totals" ? 6 : 8; for (i = 2; i <= 7; i++) d[$1, i] = $(i + off) - $i }
        $1 != "totals" { n++; for (i = 2; i <= 7; i++) w[i] += d[$1, i] }
        END {
            if (n != 2) { print "    walsenders in both readings: " n; exit 1 }
            for (i = 2; i <= 7; i++) if (w[i] != d["totals", i]) { print "    field " i - 1 ": walsenders grew by " w[i] ", the totals by " d["totals", i]; bad = 1 }
            exit bad
        }'
}
check "over the window the new leader's totals grew by exactly what its walsenders carried (no double count)" window_exact
W3=$(ws_rows)

# ------------------------------------------------------ the rows
SENT=$(cat "$T/writer/sent")
ACKED=$(acked)
check "the writer's acknowledged rows are distinct" test "$(awk '{ print $1 }' "$T/writer/acked" | sort -u | wc -l)" = "$ACKED"
cp "$T/writer/acked" "$T/acked.txt"
MISSING=$(psql -XAtq -v ON_ERROR_STOP=1 -h "$T/$NEW_LEADER" -p "${PG_PORT[$NEW_LEADER]}" -U postgres -d postgres <<EOF
CREATE TEMP TABLE acked (id integer, port integer);
\copy acked FROM '$T/acked.txt' (DELIMITER ' ')
SELECT count(*) FROM acked a WHERE NOT EXISTS (SELECT FROM load l WHERE l.id = a.id);
EOF
)
FOUND=$(q "$NEW_LEADER" "SELECT count(*) FROM load")
check "every acknowledged row is on the new leader $NEW_LEADER ($ACKED acknowledged, $MISSING missing)" test "$MISSING" = 0
all_rows_on() { [ "$(q "$1" "SELECT count(*) FROM load")" = "$FOUND" ]; }
for n in $NODES; do
    [ "$n" = "$NEW_LEADER" ] ||
        check "the replica $n has the new leader's $FOUND rows" wait_for 30 all_rows_on "$n"
done

# ------------------------------------------------------ the totals
for n in $NODES; do
    [ "$n" = "$NEW_LEADER" ] || check "a TLS session to the replica $n after the failover reads its own row" probe "$n"
done
check "no negative figure on any node (totals, totals per database and role, activity rows)" no_negatives
check "the promoted node $NEW_LEADER kept its totals through promotion (none lower, same stats_reset)" \
    totals_keep "$NEW_LEADER" '>=' "${BEFORE[$NEW_LEADER]}"
from_zero() { [ "$(q "$1" "SELECT stats_reset > to_timestamp($KILL_EPOCH) FROM ssl_renegotiate_totals")" = t ]; }
check "the killed node $OLD_LEADER started its totals again from zero (a crash): stats_reset after the kill" \
    from_zero "$OLD_LEADER"
# The other replica keeps its totals, unless Patroni rewound it too (here
# it does: it had received the old leader's last COMMIT, which the new
# leader never got): pg_rewind gives it the new leader's pg_control (and
# removes the totals file its clean stop wrote), so it starts from zero.
if [[ "$HOW_OTHER" == *pg_rewind* || "$HOW_OTHER" == *einitializ* ]]; then
    check "the replica $OTHER, rewound by Patroni, started its totals again from zero" from_zero "$OTHER"
    PROBES[$OTHER]=1
else
    check "the replica $OTHER kept its totals through the failover" totals_keep "$OTHER" '>=' "${BEFORE[$OTHER]}"
fi
PROBES[$OLD_LEADER]=1    # its totals count from its restart: the probe above only
for n in "$OLD_LEADER" "$OTHER"; do
    check "the replica $n counts this test's TLS sessions to it only (never its walreceiver)" connections_are_probes "$n"
    check "the replica $n has no walsender's row in its totals per database and role" \
        test "$(q "$n" "SELECT count(*) FROM ssl_renegotiate_database_role_totals WHERE dbid = 0")" = 0
done
check "the new leader's totals per database and role hold its walsenders (replicator, no database)" \
    test "$(q "$NEW_LEADER" "SELECT count(*) FROM ssl_renegotiate_database_role_totals WHERE dbid = 0 AND usename = 'replicator' AND connections >= 2 AND bytes_sent > 0 AND bytes_received > 0")" = 1
if [[ "$HOW_REJOINED" == *pg_rewind* ]]; then
    check "pg_rewind's TLS session (the superuser's, database postgres) is in the new leader's totals per database and role" \
        test "$(q "$NEW_LEADER" "SELECT count(*) FROM ssl_renegotiate_database_role_totals WHERE datname = 'postgres' AND usename = 'postgres' AND connections >= 1")" = 1
fi
no_stat_file() { local n; for n in $NODES; do [ ! -e "$T/$n/data/pg_stat/ssl_renegotiate.stat" ] || return 1; done; }
check "no running node has a totals file (each read and removed it at start-up)" no_stat_file
declare -A AFTER_LINE=()
for n in $NODES; do AFTER_LINE[$n]=$(summary_line "$n"); done

# The exporter's queries, as a member of pg_monitor, on every node
mkdir -p "$T/queries"
python3 "$TREE/queries.py" "$SSLR_REPO/monitoring/queries.yaml" "$T/queries"
exporter_reads() { # NODE: each query runs and returns a row
    local f out bad=
    for f in "$T"/queries/*.sql; do
        out=$(psql -XAtq -v ON_ERROR_STOP=1 -h "$T/$1" -p "${PG_PORT[$1]}" -U monitor -d postgres -f "$f" 2>&1) &&
            [ -n "$out" ] || bad+=" $(basename "$f" .sql)"
    done
    [ -z "$bad" ] || { echo "    $1: no rows or an error from$bad"; return 1; }
}
for n in $NODES; do
    # shellcheck disable=SC2012 # a count of files named by us
    check "the exporter's $(ls "$T"/queries/*.sql | wc -l) queries read $n (as a member of pg_monitor)" exporter_reads "$n"
done

# -------------------------------------------------- clean restarts
# patronictl restart: a fast stop (a shutdown checkpoint or restartpoint)
# and a start; the totals file carries the totals over.  A replica has no
# TLS traffic but this test's: its totals come back exactly.
restarted() { # NODE OLD_POSTMASTER_PID: a new postmaster answers, the cluster formed again
    [ -f "$T/$1/data/postmaster.pid" ] && [ "$(head -n 1 "$T/$1/data/postmaster.pid")" != "$2" ] &&
        q "$1" "SELECT 1" >/dev/null 2>&1 && formed
}
restart_member() { # NODE
    local pid
    pid=$(head -n 1 "$T/$1/data/postmaster.pid")
    patronictl -c "$T/$1/patroni.yml" restart sslr "$1" --force >>"$T/$1/log/patronictl.log" 2>&1 &&
        wait_for 60 restarted "$1" "$pid"
}
for n in $(members | awk '$2 != "leader" { print $1 }') "$NEW_LEADER"; do
    before=$(totals_json "$n")
    if [ "$n" = "$NEW_LEADER" ]; then
        check "the leader $n restarts cleanly (patronictl restart) and leads again" restart_member "$n"
        check "the leader $n kept its totals through the clean restart (none lower, same stats_reset)" \
            totals_keep "$n" '>=' "$before"
    else
        check "the replica $n restarts cleanly (patronictl restart)" restart_member "$n"
        check "the replica $n has exactly its totals of before the clean restart" totals_keep "$n" '=' "$before"
    fi
done
check "the leader is still $NEW_LEADER" test "$(leader)" = "$NEW_LEADER"
check "no negative figure on any node after the restarts" no_negatives

# ------------------------------------------------------------ figures
rot() { # W_BEFORE W_AFTER: each walsender's rotations between them
    join <(echo "$1") <(echo "$2") |
        awk '{ printf "%swalsender %s sent %d, received %d", n++ ? "; " : "", $2, $6 - $3, $7 - $4 }'
}
echo
echo "=== figures (PostgreSQL $(postgres --version | awk '{ print $3 }'), Patroni $(/usr/bin/patroni --version | awk '{ print $2 }'), $(elapsed)) ==="
echo "rows written (sent): $SENT; acknowledged: $ACKED ($ACKED_AT_KILL before the kill); found on the new leader after failover: $FOUND; acknowledged missing: $MISSING"
echo "failover: SIGKILL to $OLD_LEADER's postmaster; $NEW_LEADER promoted after ~$PROMOTED_AFTER s; $OLD_LEADER streaming again after ~$REJOINED_AFTER s (Patroni: $HOW_REJOINED); $OTHER: ${HOW_OTHER:-followed the new leader}"
echo "writer: $(grep -c ' connected ' "$T/writer/events") connections, $(grep -c '^[0-9.]* row ' "$T/writer/events" || true) rows without acknowledgement"
echo "new leader $NEW_LEADER walsender rotations since both streamed, under the writer's load: $(rot "$W1" "$W2")"
echo "    and with the window's 4000 rows (4 MB over the Unix socket) too: $(rot "$W1" "$W3")"
for n in $NODES; do
    role=replica
    [ -z "$HOW_OTHER" ] || [ "$n" != "$OTHER" ] || role="replica, Patroni: $HOW_OTHER"
    [ "$n" != "$OLD_LEADER" ] || role="old leader, killed"
    [ "$n" != "$NEW_LEADER" ] || role="promoted"
    echo "$n ($role):"
    echo "    before:      ${BEFORE_LINE[$n]}"
    [ "$n" != "$OLD_LEADER" ] || echo "    at the kill: $KILLED_TOTALS_LINE"
    echo "    after:       ${AFTER_LINE[$n]}"
    echo "    restarted:   $(summary_line "$n")"
done
echo "=== the Patroni test took $(elapsed) ==="
[ "$failures" -eq 0 ]
