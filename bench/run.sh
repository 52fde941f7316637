#!/usr/bin/env bash
# bench/run.sh -- what does ssl_renegotiate cost?  Run as root.
#
# Builds and installs the extension (scripts/setup.sh, in its own work
# directory, default /tmp/ssl_renegotiate-bench), then, as user postgres, in
# a throw-away directory that is removed at the end (also on failure):
#
#   * one initdb'd template copied into TWO clusters started side by side on
#     127.0.0.1 (different ports, one Unix socket directory): A without and
#     B with shared_preload_libraries = 'ssl_renegotiate'; every other
#     setting is the same (fsync=off, wal_level=minimal, autovacuum=off, ...);
#   * a table t of >= SSLR_BENCH_MB MiB of COPY text (int, bigint, numeric,
#     float8, timestamptz, date, bool, text) in both clusters, written once
#     to a file with \copy over the Unix socket, and an empty clone t2;
#   * configurations, each one psql session per COPY direction
#     (`\copy t to /dev/null`, and `\copy t2 from FILE` after an untimed
#     TRUNCATE + CHECKPOINT):
#       a    Unix socket                          cluster A
#       b    TCP, no TLS (sslmode=disable)        cluster A
#       c    TLS 1.3, extension not loaded        cluster A   <- the baseline
#       d    TLS 1.3, extension, limit = 0        cluster B   (accounting only)
#       e    TLS 1.3, extension, limit = 64kB     cluster B
#       f    TLS 1.3, extension, limit = 640kB    cluster B
#       g    TLS 1.3, extension, limit = 512MB    cluster B   (the default)
#       h64  TLS 1.2, tls12 = renegotiate, 64kB   cluster B
#       h1M  TLS 1.2, tls12 = renegotiate, 1MB    cluster B
#     settings go per connection in the startup packet (options='-c ...');
#   * pgbench -S (TLS 1.3, many small messages) and pgbench -C -S (TLS
#     connection set-up) against A (c) and B (d, limit = 0);
#   * first one untimed pass per COPY configuration that checks the data
#     (md5 of the COPY TO output, and of t2 after COPY FROM, against the
#     file), then SSLR_BENCH_ROUNDS rounds: every round runs every job once,
#     the order rotated from round to round; every figure is also given as a
#     ratio to (c) of the same round, and summarised as median [min-max];
#   * CPU: psql's and the backend's own CPU time (/proc/PID/schedstat,
#     nanoseconds) around the \copy alone; for pgbench the client's
#     getrusage (/usr/bin/time) and the backends' CPU as the postmaster's
#     cutime+cstime (exited children); the CPU cost of one rekey from the
#     difference between (e) and (d) divided by the rekeys counted in
#     ssl_renegotiate_activity at the end of the session.
#   * a run that fails is recorded (error column, FAILED in the table) and
#     the benchmark goes on; a configuration that fails its verification run
#     is left out of the rounds; "others CPU" per sample is what every other
#     process of the machine used meanwhile (a neighbour's interference).
# Output: a table on stdout, also in bench/results/<date>.txt, the raw
# samples in bench/results/<date>.csv, and bench/results/plot.png (gnuplot).
#
# Environment:
#   SSLR_BENCH_MB              size of the COPY text in MiB (default 200)
#   SSLR_BENCH_ROUNDS          rounds (default 5)
#   SSLR_BENCH_PGBENCH_SECONDS duration of each pgbench run (default 6)
#   SSLR_BENCH_BUDGET          seconds (default 840): no round is started that
#                              would end past it (the report says how many ran)
#   SSLR_BENCH_PGBENCH_CLIENTS pgbench -c (default 2)
#   SSLR_BENCH_PGBENCH_SCALE   pgbench -i -s (default 5)
#   SSLR_BENCH_CONFIGS         COPY configurations to run (default all:
#                              "a b c d e f g h64 h1M"; c is always run)
#   SSLR_BENCH_NO_PGBENCH=1    skip the pgbench jobs
#   SSLR_BENCH_PIN=0           don't pin COPY sessions (default: psql on CPU 0,
#                              its backend on CPU 1; pgbench is never pinned)
#   SSLR_BENCH_SSL_CA=1        set ssl_ca_file (PostgreSQL then asks clients for
#                              a certificate: SSL_VERIFY_PEER)
#   SSLR_WORKDIR               setup.sh's work directory
#                              (default /tmp/ssl_renegotiate-bench)
# Quick mode for development:
#   sudo SSLR_BENCH_MB=20 SSLR_BENCH_ROUNDS=1 SSLR_BENCH_PGBENCH_SECONDS=2 bench/run.sh
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

# ===================================================================== root
if [ -z "${SSLR_BENCH_INNER:-}" ]; then
    sslr_require_root run.sh
    echo "=== Setup: packages, build and install of ssl_renegotiate ===" >&2
    WORKDIR=$(sslr_setup "${SSLR_WORKDIR:-/tmp/ssl_renegotiate-bench}")
    OUTDIR=$WORKDIR/bench/results.out
    sslr_results_dir "$OUTDIR"
    rc=0
    sslr_as_postgres /tmp \
        SSLR_BENCH_INNER=1 SSLR_BENCH_OUT="$OUTDIR" SSLR_BENCH_REV="$(sslr_revision)" \
        SSLR_BENCH_MB="${SSLR_BENCH_MB:-200}" SSLR_BENCH_ROUNDS="${SSLR_BENCH_ROUNDS:-5}" \
        SSLR_BENCH_PGBENCH_SECONDS="${SSLR_BENCH_PGBENCH_SECONDS:-6}" SSLR_BENCH_BUDGET="${SSLR_BENCH_BUDGET:-840}" \
        SSLR_BENCH_PGBENCH_CLIENTS="${SSLR_BENCH_PGBENCH_CLIENTS:-2}" \
        SSLR_BENCH_PGBENCH_SCALE="${SSLR_BENCH_PGBENCH_SCALE:-5}" \
        SSLR_BENCH_CONFIGS="${SSLR_BENCH_CONFIGS:-}" SSLR_BENCH_NO_PGBENCH="${SSLR_BENCH_NO_PGBENCH:-}" \
        SSLR_BENCH_SSL_CA="${SSLR_BENCH_SSL_CA:-}" SSLR_BENCH_PIN="${SSLR_BENCH_PIN:-1}" \
        bash "$WORKDIR/bench/run.sh" || rc=$?
    sslr_collect_results "$OUTDIR"
    exit "$rc"
fi

# ================================================================ postgres
export PATH="$PG_BINDIR:$PATH"
export PAGER=cat PSQL_PAGER=cat
export LC_ALL=C LC_NUMERIC=C

MB=${SSLR_BENCH_MB:-200}
ROUNDS=${SSLR_BENCH_ROUNDS:-5}
PGB_SECONDS=${SSLR_BENCH_PGBENCH_SECONDS:-6}
BUDGET=${SSLR_BENCH_BUDGET:-840}
PGB_CLIENTS=${SSLR_BENCH_PGBENCH_CLIENTS:-2}
PGB_SCALE=${SSLR_BENCH_PGBENCH_SCALE:-5}
OUT=${SSLR_BENCH_OUT:?}
ALL_CONFIGS="a b c d e f g h64 h1M"
CONFIGS=${SSLR_BENCH_CONFIGS:-$ALL_CONFIGS}
case " $CONFIGS " in *" c "*) ;; *) CONFIGS="c $CONFIGS" ;; esac
for x in $CONFIGS; do
    case " $ALL_CONFIGS " in *" $x "*) ;; *) echo "run.sh: unknown configuration '$x'" >&2; exit 1 ;; esac
done

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 1; }

T=$(mktemp -d /tmp/sslr-bench.XXXXXX)
STARTED_A= STARTED_B=
BENCH_START=$(date +%s)

cleanup() {
    local rc=$?
    trap - EXIT
    for d in A B; do
        if [ -f "$T/data$d/postmaster.pid" ]; then
            pg_ctl -D "$T/data$d" -m fast -w stop >/dev/null 2>&1 ||
                pg_ctl -D "$T/data$d" -m immediate stop >/dev/null 2>&1 || true
        fi
    done
    if [ "$rc" -ne 0 ]; then
        echo "run.sh: FAILED (exit status $rc)" >&2
        for d in A B; do
            [ -f "$T/server$d.log" ] && { echo "--- last lines of server log $d:" >&2; tail -n 20 "$T/server$d.log" >&2; }
        done
    fi
    rm -rf "$T"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ----------------------------------------------------------- certificates
log "throw-away CA and server certificate in $T"
C=$T/certs
bash "$(dirname "${BASH_SOURCE[0]}")/../scripts/make_certs.sh" "$C" "ssl_renegotiate bench CA" >"$T/openssl.log" 2>&1 ||
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
STARTED_A=1 STARTED_B=1
PM_A=$(head -n 1 "$T/dataA/postmaster.pid")
PM_B=$(head -n 1 "$T/dataB/postmaster.pid")

UNIX_A="host=$T port=$PA dbname=postgres"
UNIX_B="host=$T port=$PB dbname=postgres"
q() { psql -X -q -v ON_ERROR_STOP=1 -P pager=off "$@"; }
qa() { q -At -d "$UNIX_A" "$@"; }
qb() { q -At -d "$UNIX_B" "$@"; }

qb -c 'CREATE EXTENSION ssl_renegotiate'
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
TABLE_SIZE=$(qa -c "SELECT pg_size_pretty(pg_relation_size('t'))")
if [ -z "${SSLR_BENCH_NO_PGBENCH:-}" ]; then
    log "pgbench -i -s $PGB_SCALE in both clusters"
    for p in "$PA" "$PB"; do
        pgbench -i -q -s "$PGB_SCALE" -h "$T" -p "$p" postgres >"$T/pgbench-init.log" 2>&1 ||
            { cat "$T/pgbench-init.log" >&2; exit 1; }
        psql -X -q -h "$T" -p "$p" -d postgres -c 'VACUUM (FREEZE, ANALYZE)' -c CHECKPOINT
    done
fi

# ---------------------------------------------------------- configurations
CLK_TCK=$(getconf CLK_TCK)
# COPY sessions: psql on one CPU, its backend on another.  Left to the
# scheduler, the two sometimes share a CPU for a while, and on this kind of
# VM a context switch is dear: the same COPY then takes ~1.5x the CPU time.
PIN= CLIENT_PIN= BACKEND_CPU=
if [ "${SSLR_BENCH_PIN:-1}" != 0 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
    PIN=1 BACKEND_CPU=1 CLIENT_PIN="taskset -c 0"
fi
# busy CPU of the whole machine, in USER_HZ ticks (user nice system irq softirq steal)
BUSY_TICKS="awk '/^cpu /{ print \$2 + \$3 + \$4 + \$7 + \$8 + \$9 }' /proc/stat"
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
TLS13="sslmode=require ssl_min_protocol_version=TLSv1.3 gssencmode=disable"
TLS12="sslmode=require ssl_max_protocol_version=TLSv1.2 gssencmode=disable"
conn_of() { # config -> conninfo
    case $1 in
        a) echo "$UNIX_A" ;;
        b) echo "host=127.0.0.1 port=$PA dbname=postgres sslmode=disable gssencmode=disable" ;;
        c) echo "host=127.0.0.1 port=$PA dbname=postgres $TLS13" ;;
        d) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=0'" ;;
        e) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=64kB'" ;;
        f) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=640kB'" ;;
        g) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=512MB'" ;;
        h64) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS12 options='-c ssl_renegotiate.byte_limit=64kB -c ssl_renegotiate.tls12=renegotiate'" ;;
        h1M) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS12 options='-c ssl_renegotiate.byte_limit=1MB -c ssl_renegotiate.tls12=renegotiate'" ;;
    esac
}
label_of() {
    case $1 in
        a) echo "(a) Unix socket" ;;
        b) echo "(b) TCP, no TLS" ;;
        c) echo "(c) TLS 1.3, no extension" ;;
        d) echo "(d) TLS 1.3, ext, limit 0" ;;
        e) echo "(e) TLS 1.3, ext, 64kB" ;;
        f) echo "(f) TLS 1.3, ext, 640kB" ;;
        g) echo "(g) TLS 1.3, ext, 512MB" ;;
        h64) echo "(h) TLS 1.2, reneg, 64kB" ;;
        h1M) echo "(h) TLS 1.2, reneg, 1MB" ;;
        pgS) echo "pgbench -S" ;;
        pgC) echo "pgbench -C -S" ;;
    esac
}
on_b() { case $1 in d | e | f | g | h64 | h1M) return 0 ;; *) return 1 ;; esac; }

# One psql session: an untimed preamble, CPU counters of psql and the
# backend, the timed \copy, CPU counters again, then what the extension
# counted for this connection.  Lines are tagged for the parser.
# schedstat field 1 = nanoseconds on a CPU (user + system).
session_script() { # config direction target
    local cfg=$1 dir=$2 target=$3
    if [ -n "$PIN" ]; then
        echo "SELECT pg_backend_pid() AS sslr_bench_pid \\gset"
        echo "\\setenv SSLR_BENCH_BPID :sslr_bench_pid"
        echo "\\! taskset -pc $BACKEND_CPU \$SSLR_BENCH_BPID >/dev/null"
    fi
    if [ "$dir" = from ]; then
        echo "TRUNCATE t2;"
        echo "CHECKPOINT;"
    fi
    echo "SELECT 'B0 ' || split_part(pg_read_file('/proc/self/schedstat'), ' ', 1);"
    echo "\\! echo \"C0 \$(cut -d' ' -f1 /proc/\$PPID/schedstat)\"; echo \"M0 \$($BUSY_TICKS)\""
    echo "\\timing on"
    if [ "$dir" = to ]; then
        echo "\\copy t to '$target'"
    else
        echo "\\copy t2 from '$target'"
    fi
    echo "\\timing off"
    echo "SELECT 'B1 ' || split_part(pg_read_file('/proc/self/schedstat'), ' ', 1);"
    echo "\\! echo \"C1 \$(cut -d' ' -f1 /proc/\$PPID/schedstat)\"; echo \"M1 \$($BUSY_TICKS)\""
    case $cfg in
        a) echo "SELECT 'S none none';" ;;
        *) echo "SELECT 'S ' || coalesce(version, 'none') || ' ' || coalesce(cipher, 'none') FROM pg_stat_ssl WHERE pid = pg_backend_pid();" ;;
    esac
    if on_b "$cfg"; then
        echo "SELECT 'R ' || concat_ws(' ', rekeys_sent, rekeys_received, round(rekey_time::numeric, 3), bytes_sent, bytes_received, rekey_failures, current_setting('ssl_renegotiate.byte_limit')) FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();"
    fi
}

CSV=$T/samples.csv
echo "round,job,config,direction,elapsed_ms,mib_per_s,tps,client_cpu_ms,backend_cpu_ms,rekeys_sent,rekeys_received,rekey_time_ms,tls_bytes_sent,tls_bytes_received,tls_version,cipher,other_cpu_ms,error" >"$CSV"

# A failed run is recorded (error column) and the benchmark goes on.
fail_row() { # round job config direction message
    local msg
    msg=$(printf '%s' "$5" | tr ',\n\r' ';  ' | cut -c1-160)
    echo "$1,$2,$3,$4,,,,,,,,,,,,,,$msg" >>"$CSV"
    log "  $2 (round $1) FAILED: $msg"
}

# run_copy round config direction target -> appends a CSV row; 1 on failure
run_copy() {
    local round=$1 cfg=$2 dir=$3 target=$4 o=$T/session.out
    session_script "$cfg" "$dir" "$target" >"$T/session.sql"
    if ! $CLIENT_PIN psql -X -At -v ON_ERROR_STOP=1 -P pager=off -d "$(conn_of "$cfg")" \
        -f "$T/session.sql" >"$o" 2>"$T/session.err"; then
        fail_row "$round" "${cfg}_$dir" "$cfg" "$dir" \
            "$(grep -v '^psql:.*connection to server was lost' "$T/session.err" | head -n 2 | sed 's/^psql:[^:]*:[0-9]*: //')"
        return 1
    fi
    perl -e '
        my ($round, $cfg, $dir, $bytes, $hz) = @ARGV;
        my %v; my ($ms, $rk, $s);
        while (<STDIN>) {
            chomp;
            if (/^(B0|B1|C0|C1|M0|M1) (\d+)$/) { $v{$1} = $2 }
            elsif (/^Time: ([\d.]+) ms/) { $ms = $1 }
            elsif (/^S (\S+) (\S+)$/) { $s = "$1,$2" }
            elsif (/^R (.*)$/) { $rk = [split / /, $1] }
        }
        for (qw(B0 B1 C0 C1)) { die "missing $_\n" unless defined $v{$_} }
        die "missing Time\n" unless defined $ms;
        die "missing S\n" unless defined $s;
        my @r = $rk ? @$rk[0..4] : ("", "", "", "", "");
        my ($cc, $bc) = (($v{C1} - $v{C0}) / 1e6, ($v{B1} - $v{B0}) / 1e6);
        # CPU used by every other process meanwhile (USER_HZ ticks of /proc/stat)
        my $other = defined $v{M1} && defined $v{M0} ? sprintf("%.0f", ($v{M1} - $v{M0}) * 1000 / $hz - $cc - $bc) : "";
        printf "%s,%s_%s,%s,%s,%.3f,%.2f,,%.1f,%.1f,%s,%s,%s,\n", $round, $cfg, $dir, $cfg, $dir, $ms,
            $bytes / 1048576 / ($ms / 1000), $cc, $bc, join(",", @r), $s, $other;
    ' "$round" "$cfg" "$dir" "$BYTES" "$CLK_TCK" <"$o" >>"$CSV" || { cat "$o" >&2; die "config $cfg, COPY $dir: cannot parse psql output"; }
}

# postmaster's CPU of exited children (ticks)
children_ticks() { awk '{ print $16 + $17 }' "/proc/$1/stat"; }

run_pgbench() { # round job (pgS|pgC) config (c|d)
    local round=$1 job=$2 cfg=$3 port pm opts=() t0 t1 m0 m1 tps
    if [ "$cfg" = c ]; then port=$PA pm=$PM_A; else port=$PB pm=$PM_B; fi
    [ "$job" = pgC ] && opts=(-C)
    t0=$(children_ticks "$pm")
    m0=$(busy_ticks)
    if ! env PGHOST=127.0.0.1 PGPORT="$port" PGSSLMODE=require PGSSLMINPROTOCOLVERSION=TLSv1.3 \
        PGGSSENCMODE=disable PGOPTIONS="$([ "$cfg" = d ] && echo '-c ssl_renegotiate.byte_limit=0')" \
        /usr/bin/time -f 'RUSAGE %U %S' -o "$T/pgbench.time" \
        pgbench -n -S "${opts[@]}" -c "$PGB_CLIENTS" -j "$PGB_CLIENTS" -T "$PGB_SECONDS" postgres \
        >"$T/pgbench.out" 2>&1; then
        fail_row "$round" "${job}_$cfg" "$cfg" "$job" "$(grep -m 2 -i 'error\|fatal' "$T/pgbench.out")"
        return 1
    fi
    # the postmaster reaps the backends just after they exit
    sleep 0.3
    t1=$(children_ticks "$pm")
    m1=$(busy_ticks)
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$T/pgbench.out" | head -n 1)
    [ -n "$tps" ] || { fail_row "$round" "${job}_$cfg" "$cfg" "$job" "no tps in pgbench output"; return 1; }
    awk -v r="$round" -v job="$job" -v cfg="$cfg" -v tps="$tps" -v s="$PGB_SECONDS" \
        -v bt=$((t1 - t0)) -v mt=$((m1 - m0)) -v hz="$CLK_TCK" '
        /^RUSAGE/ {
            c = ($2 + $3) * 1000; b = bt * 1000 / hz
            printf "%s,%s_%s,%s,%s,%.3f,,%s,%.1f,%.1f,,,,,,TLSv1.3,,%.0f,\n", r, job, cfg, cfg, job, s * 1000, tps, c, b, mt * 1000 / hz - c - b
        }
    ' "$T/pgbench.time" >>"$CSV"
}

# ------------------------------------------------------ verification pass
log "verification pass (untimed): every COPY configuration once, output checked against the file"
# A configuration that fails here is left out of the rounds (and reported).
GOOD_CONFIGS=
for cfg in $CONFIGS; do
    ok=1
    if run_copy 0 "$cfg" to "$T/out.copy"; then
        got=$(md5sum <"$T/out.copy" | cut -d' ' -f1)
        if [ "$got" != "$REF_MD5" ]; then
            fail_row 0 "${cfg}_to" "$cfg" to "DATA MISMATCH: COPY TO output md5 $got"
            ok=
        fi
    else
        ok=
    fi
    rm -f "$T/out.copy"
    if run_copy 0 "$cfg" from "$DATA"; then
        if on_b "$cfg"; then u=$UNIX_B; else u=$UNIX_A; fi
        got=$(psql -X -q -d "$u" -c '\copy t2 to stdout' | md5sum | cut -d' ' -f1)
        if [ "$got" != "$REF_MD5" ]; then
            fail_row 0 "${cfg}_from" "$cfg" from "DATA MISMATCH: t2 after COPY FROM md5 $got"
            ok=
        fi
    else
        ok=
    fi
    if [ -n "$ok" ]; then
        GOOD_CONFIGS="$GOOD_CONFIGS $cfg"
        log "  $(label_of "$cfg"): COPY TO and COPY FROM data identical (md5 $got)"
    else
        [ "$cfg" != c ] || die "the baseline (c) failed its verification run"
        log "  $(label_of "$cfg"): FAILED, left out of the timed rounds"
    fi
done

# ----------------------------------------------------------------- rounds
JOBS=()
for cfg in $GOOD_CONFIGS; do JOBS+=("copy:$cfg:to" "copy:$cfg:from"); done
if [ -z "${SSLR_BENCH_NO_PGBENCH:-}" ]; then
    JOBS+=("pgS:c" "pgS:d" "pgC:c" "pgC:d")
fi
NJOBS=${#JOBS[@]}
ROUNDS_DONE=0
ROUNDS_START=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
    rstart=$(date +%s)
    # stop early rather than overrun the time budget (one more round would)
    if [ "$r" -gt 1 ]; then
        per_round=$(( (rstart - ROUNDS_START) / (r - 1) ))
        if [ $(( rstart - BENCH_START + per_round + 15 )) -gt "$BUDGET" ]; then
            log "time budget: another round (~${per_round} s) would pass SSLR_BENCH_BUDGET=$BUDGET s; stopping after $((r - 1)) rounds"
            break
        fi
    fi
    # rotate the order: round r starts (r-1) * step jobs further on
    step=$(( (NJOBS + ROUNDS - 1) / ROUNDS ))
    [ "$step" -ge 1 ] || step=1
    off=$(( ((r - 1) * step) % NJOBS ))
    for ((k = 0; k < NJOBS; k++)); do
        job=${JOBS[$(( (off + k) % NJOBS ))]}
        IFS=: read -r kind cfg dir <<<"$job"
        case $kind in
            copy)
                if [ "$dir" = to ]; then
                    run_copy "$r" "$cfg" to /dev/null || true
                else
                    run_copy "$r" "$cfg" from "$DATA" || true
                fi ;;
            pgS | pgC) run_pgbench "$r" "$kind" "$cfg" || true ;;
        esac
    done
    ROUNDS_DONE=$r
    log "round $r/$ROUNDS done in $(( $(date +%s) - rstart )) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
done

# ---------------------------------------------------------------- report
STAMP=$(date +%Y-%m-%d_%H%M)
RESULT=$OUT/$STAMP.txt
cp "$CSV" "$OUT/$STAMP.csv"

{
    echo "ssl_renegotiate benchmark, $(date '+%Y-%m-%d %H:%M %Z')"
    echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, kernel $(uname -r)"
    echo "software: PostgreSQL $PG_VERSION, $(openssl version), extension at ${SSLR_BENCH_REV:-unknown}"
    echo "data: $BYTES bytes of COPY text ($DATA_MB MiB, $ROWS rows, table $TABLE_SIZE); rounds: $ROUNDS_DONE of $ROUNDS; pgbench: -c $PGB_CLIENTS -j $PGB_CLIENTS -T $PGB_SECONDS, scale $PGB_SCALE"
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); total time $(( $(date +%s) - BENCH_START )) s; $([ -n "$PIN" ] && echo "COPY sessions pinned: psql on CPU 0, backend on CPU $BACKEND_CPU" || echo "no CPU pinning")"
    echo
} >"$RESULT"

perl - "$CSV" "$CONFIGS" >>"$RESULT" <<'PERL'
use strict; use warnings;
my ($csv, $configs) = @ARGV;
my @configs = split ' ', $configs;
open my $fh, '<', $csv or die;
my $hdr = <$fh>; chomp $hdr; my @h = split /,/, $hdr;
my (%s, %fail);                # $s{job}{round} = row hash; $fail{job} = [messages]
while (<$fh>) {
    chomp; my @f = split /,/, $_, -1; my %r; @r{@h} = @f;
    if ($r{error} ne "") { push @{$fail{$r{job}}}, "round $r{round}: $r{error}"; next }
    next if $r{round} == 0;     # verification pass
    $s{$r{job}}{$r{round}} = \%r;
}
sub failnote { my ($job) = @_; return '' unless $fail{$job};
    my $n = @{$fail{$job}}; return "  ** $n run(s) FAILED, first: $fail{$job}[0]" }
sub med { my @x = sort { $a <=> $b } @_; return undef unless @x; my $n = @x;
          return $n % 2 ? $x[$n/2] : ($x[$n/2-1] + $x[$n/2]) / 2 }
sub mm { my @x = sort { $a <=> $b } @_; return ($x[0], $x[-1]) }
sub fmt { my ($p, @x) = @_; return "-" unless @x; my ($lo, $hi) = mm(@x);
          return sprintf("%.${p}f [%.${p}f-%.${p}f]", med(@x), $lo, $hi) }
my %label = (a => '(a) Unix socket', b => '(b) TCP, no TLS', c => '(c) TLS 1.3, no extension',
    d => '(d) TLS 1.3, ext, limit 0', e => '(e) TLS 1.3, ext, limit 64kB',
    f => '(f) TLS 1.3, ext, limit 640kB', g => '(g) TLS 1.3, ext, limit 512MB',
    h64 => '(h) TLS 1.2, renegotiate, 64kB', h1M => '(h) TLS 1.2, renegotiate, 1MB');
# ratio of job's metric to the baseline job's, round by round
sub ratios { my ($job, $base, $key) = @_; my @r;
    for my $rd (sort { $a <=> $b } keys %{$s{$job} || {}}) {
        next unless $s{$base}{$rd} && $s{$base}{$rd}{$key} > 0;
        push @r, $s{$job}{$rd}{$key} / $s{$base}{$rd}{$key} }
    return @r }
sub col { my ($job, $key) = @_; return map { $_->{$key} } grep { defined $_->{$key} && $_->{$key} ne '' } values %{$s{$job} || {}} }
# best of the rounds against the best of (c): robust to a round that a
# neighbour's load slowed down, which the same-round ratio is not
sub best { my ($job, $base, $key) = @_; my @x = sort { $b <=> $a } col($job, $key); my @y = sort { $b <=> $a } col($base, $key);
    return (@x && @y && $y[0] > 0) ? $x[0] / $y[0] : undef }
my (%medratio, %bestratio);
for my $dir (qw(to from)) {
    printf "COPY %s: %s (MiB/s of COPY text; median [min-max] over rounds; ratio = same round's (c))\n",
        $dir eq 'to' ? 'TO (server -> psql, to /dev/null)' : 'FROM (psql -> server, into t2)', '';
    printf "%-32s %-24s %-22s %-6s %-19s %-19s %-12s %-14s %s\n", 'configuration', 'MiB/s', 'ratio to (c)', 'best',
        'psql CPU s', 'backend CPU s', 'rekeys s/r', 'rekey_time ms', 'others CPU s';
    for my $c (@configs) {
        my $job = "${c}_$dir";
        unless ($s{$job}) {
            printf "%-32s %s\n", $label{$c}, failnote($job) || 'not run' if $fail{$job};
            next;
        }
        my @ratio = ratios($job, "c_$dir", 'mib_per_s');
        $medratio{$job} = med(@ratio);
        $bestratio{$job} = best($job, "c_$dir", 'mib_per_s');
        my @rs = col($job, 'rekeys_sent'); my @rr = col($job, 'rekeys_received'); my @rt = col($job, 'rekey_time_ms');
        printf "%-32s %-24s %-22s %-6s %-19s %-19s %-12s %-14s %s\n", $label{$c}, fmt(1, col($job, 'mib_per_s')),
            fmt(3, @ratio), sprintf("%.3f", $bestratio{$job}), fmt(2, map { $_ / 1000 } col($job, 'client_cpu_ms')),
            fmt(2, map { $_ / 1000 } col($job, 'backend_cpu_ms')),
            @rs ? sprintf("%d/%d", med(@rs), med(@rr)) : '-', @rt ? sprintf("%.1f", med(@rt)) : '-',
            fmt(2, map { $_ / 1000 } col($job, 'other_cpu_ms'));
        print failnote($job), "\n" if $fail{$job};
    }
    print "\n";
}
if ($s{pgS_c}) {
    print "pgbench over TLS 1.3 (median [min-max] over rounds; ratio = same round's (c))\n";
    printf "%-32s %-24s %-22s %-6s %-19s %-21s %s\n", 'run', 'tps', 'ratio to (c)', 'best', 'client CPU s', 'backends CPU s', 'others CPU s';
    for my $j (qw(pgS pgC)) {
        for my $c (qw(c d)) {
            my $job = "${j}_$c";
            print "$job", failnote($job), "\n" if $fail{$job};
            next unless $s{$job};
            my @ratio = ratios($job, "${j}_c", 'tps');
            $medratio{$job} = med(@ratio);
            $bestratio{$job} = best($job, "${j}_c", 'tps');
            printf "%-32s %-24s %-22s %-6s %-19s %-21s %s\n",
                ($j eq 'pgS' ? 'pgbench -S' : 'pgbench -C -S') . ($c eq 'c' ? ', (c) no extension' : ', (d) ext, limit 0'),
                fmt(0, col($job, 'tps')), fmt(3, @ratio), sprintf("%.3f", $bestratio{$job}),
                fmt(2, map { $_ / 1000 } col($job, 'client_cpu_ms')), fmt(2, map { $_ / 1000 } col($job, 'backend_cpu_ms')),
                fmt(2, map { $_ / 1000 } col($job, 'other_cpu_ms'));
        }
    }
    print "\n";
}
# cost of one rekey: CPU difference to a reference configuration in the same
# round, divided by the rekeys of the configuration (both sides summed)
print "CPU cost of key rotation: median over rounds of (CPU(x) - CPU(ref)) / (rekeys(x) - rekeys(ref)) in us,\n";
print "per rekey (rekeys_sent + rekeys_received) and per event (max of the two: a KeyUpdate, a requested KeyUpdate\n";
print "and its answer, or one TLS 1.2 renegotiation, which rotates both directions); rekey_time = server-measured\n";
printf "%-50s %8s %7s %-19s %-19s %s\n", 'configuration vs reference, COPY direction', 'rekeys', 'events',
    'backend us/rk /ev', 'psql us/rk /ev', 'rekey_time us/sent';
my %short = (d => '(d) TLS 1.3 limit 0', e => '(e) TLS 1.3 64kB', f => '(f) TLS 1.3 640kB',
    h64 => '(h) TLS 1.2 64kB', h1M => '(h) TLS 1.2 1MB');
for my $p (['e', 'd'], ['f', 'd'], ['h64', 'h1M']) {
    my ($x, $ref) = @$p;
    for my $dir (qw(to from)) {
        my ($jx, $jr) = ("${x}_$dir", "${ref}_$dir");
        next unless $s{$jx} && $s{$jr};
        my (@b, @cl, @n, @ev, @be, @ce, @rt);
        for my $rd (keys %{$s{$jx}}) {
            my ($X, $R) = ($s{$jx}{$rd}, $s{$jr}{$rd}); next unless $R;
            my $k = ($X->{rekeys_sent} + $X->{rekeys_received}) - (($R->{rekeys_sent} || 0) + ($R->{rekeys_received} || 0));
            my $mx = sub { my $h = shift; my ($a, $b) = ($h->{rekeys_sent} || 0, $h->{rekeys_received} || 0); $a > $b ? $a : $b };
            my $e = $mx->($X) - $mx->($R);
            next unless $k > 0 && $e > 0;
            push @n, $k; push @ev, $e;
            my ($db, $dc) = (($X->{backend_cpu_ms} - $R->{backend_cpu_ms}) * 1000, ($X->{client_cpu_ms} - $R->{client_cpu_ms}) * 1000);
            push @b, $db / $k; push @cl, $dc / $k; push @be, $db / $e; push @ce, $dc / $e;
            push @rt, $X->{rekey_time_ms} * 1000 / $X->{rekeys_sent} if $X->{rekeys_sent} > 0;
        }
        next unless @n;
        # a handful of rotations drowns in the noise of the CPU figures
        my $few = med(@ev) < 20;
        printf "%-50s %8d %7d %-19s %-19s %s\n", "$short{$x} vs $short{$ref}, COPY \U$dir", med(@n), med(@ev),
            $few ? '(too few)' : sprintf("%.0f / %.0f", med(@b), med(@be)),
            $few ? '(too few)' : sprintf("%.0f / %.0f", med(@cl), med(@ce)),
            @rt ? sprintf("%.0f", med(@rt)) : '-';
    }
}
print "\n";
print "Targets: judged on the median of the same-round ratios to (c); 'best' = best round of x / best round of (c)\n";
sub target { my ($what, $job, $min) = @_; my $v = $medratio{$job}; my $b = $bestratio{$job};
    printf "  %-52s %s  (best %s)  %s\n", $what, defined $v ? sprintf("%.3f", $v) : '  -  ',
        defined $b ? sprintf("%.3f", $b) : '  -  ',
        !defined $v ? ($fail{$job} ? 'FAILED' : 'not run') :
        $min ? ($v >= $min ? "met (>= $min)" : "MISSED (< $min)") : 'reported' }
target('(d) accounting only, COPY TO', 'd_to', 0.99);
target('(d) accounting only, COPY FROM', 'd_from', 0.99);
target('(d) accounting only, pgbench -S tps', 'pgS_d', 0.99);
target('(d) accounting only, pgbench -C -S tps', 'pgC_d', 0.98);
target('(e) TLS 1.3 KeyUpdate every 64kB, COPY TO', 'e_to', 0.95);
target('(e) TLS 1.3 KeyUpdate every 64kB, COPY FROM', 'e_from', 0.95);
target('(h) TLS 1.2 renegotiation every 64kB, COPY TO', 'h64_to', 0);
target('(h) TLS 1.2 renegotiation every 64kB, COPY FROM', 'h64_from', 0);
print "\n";
# the plot's data: x position, label, TO, FROM (TLS 1.3 series), and TLS 1.2
open my $pd, '>', "$csv.plot" or die;
my @pts = (['e', 1, '64kB'], ['f', 2, '640kB'], ['h1M', 3, '1MB'], ['g', 4, '512MB'], ['d', 5, 'off (0)']);
# columns: series x label, then median min max of COPY TO, and of COPY FROM
sub mmm { my @x = col($_[0], 'mib_per_s'); return (0, 0, 0) unless @x; my ($lo, $hi) = mm(@x); return (med(@x), $lo, $hi) }
push @pts, ['h64', 1, '64kB'];
for my $p (@pts) {
    my ($c, $x, $l) = @$p;
    next unless $s{"${c}_to"} && $s{"${c}_from"};
    printf $pd "%s %d \"%s\" %.2f %.2f %.2f %.2f %.2f %.2f\n", ($c =~ /^h/ ? 'tls12' : 'tls13'), $x, $l,
        mmm("${c}_to"), mmm("${c}_from");
}
for my $c (qw(b c)) {
    printf $pd "line_%s 0 \"\" %.2f %.2f\n", $c, med(col("${c}_to", 'mib_per_s')), med(col("${c}_from", 'mib_per_s')) if $s{"${c}_to"};
}
close $pd;
PERL

{
    echo "Notes: MiB = 2^20 bytes of COPY text; elapsed time is psql's \\timing of the \\copy alone (no connection set-up)."
    echo "CPU: psql and its backend from /proc/PID/schedstat around the \\copy; pgbench client from getrusage,"
    echo "backends from the postmaster's cutime+cstime. COPY FROM runs after an untimed TRUNCATE t2 + CHECKPOINT."
    echo "others CPU: what every other process of the machine used meanwhile (/proc/stat busy time minus ours; for"
    echo "pgbench it includes the postmaster's forks): a sample with a lot of it was slowed down by a neighbour."
    echo "Data checked once per configuration (untimed pass): md5 of COPY TO output and of t2 after COPY FROM = $REF_MD5."
    echo "Raw samples: $STAMP.csv (round 0 = the verification pass, not in the table)."
} >>"$RESULT"

# ------------------------------------------------------------------- plot
PLOTDATA=$CSV.plot
if command -v gnuplot >/dev/null 2>&1; then
    line() { awk -v k="line_$1" -v col="$2" '$1 == k { print $col }' "$PLOTDATA"; }
    B_TO=$(line b 4) B_FROM=$(line b 5) C_TO=$(line c 4) C_FROM=$(line c 5)
    grep '^tls13' "$PLOTDATA" | sort -k2n >"$T/tls13.dat" || true
    grep '^tls12' "$PLOTDATA" | sort -k2n >"$T/tls12.dat" || true
    term="pngcairo size 1000,680 font 'sans,10'"
    gnuplot -e "set terminal $term" >/dev/null 2>&1 || term="png size 1000,680"
    {
        echo "set terminal $term"
        echo "set output '$OUT/plot.png'"
        echo "set termoption noenhanced"
        echo "set title \"ssl_renegotiate: COPY throughput against ssl_renegotiate.byte_limit ($DATA_MB MiB of COPY text, $(nproc) CPUs)\\npoints: median of $ROUNDS_DONE rounds, bars: min-max; horizontal lines: medians of (b) TCP without TLS and (c) TLS 1.3 without the extension\""
        echo "set xlabel 'ssl_renegotiate.byte_limit (bytes under one key, each direction); TLS 1.2: renegotiation at 64kB and 1MB'"
        echo "set ylabel 'MiB/s of COPY text'"
        echo "set xrange [0.5:5.5]"
        echo "set yrange [0:*]"
        echo "set offsets 0, 0, graph 0.08, 0"
        echo "set xtics ('64kB' 1, '640kB' 2, '1MB' 3, '512MB' 4, 'off (0)' 5)"
        echo "set key outside bottom center horizontal maxrows 2"
        echo "set grid ytics"
        echo "set style line 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.3"
        echo "set style line 2 lc rgb '#d62728' lw 2 pt 5 ps 1.3"
        echo "set style line 3 lc rgb '#1f77b4' lw 2 pt 6 ps 1.3 dt 2"
        echo "set style line 4 lc rgb '#d62728' lw 2 pt 4 ps 1.3 dt 2"
        p="plot"
        # TLS 1.2 points a little to the right so that the bars don't overlap
        [ -s "$T/tls13.dat" ] && p="$p '$T/tls13.dat' using 2:4:5:6 with yerrorlines ls 1 title 'TLS 1.3, COPY TO',"
        [ -s "$T/tls13.dat" ] && p="$p '$T/tls13.dat' using 2:7:8:9 with yerrorlines ls 2 title 'TLS 1.3, COPY FROM',"
        [ -s "$T/tls12.dat" ] && p="$p '$T/tls12.dat' using (\$2+0.08):4:5:6 with yerrorlines ls 3 title 'TLS 1.2 renegotiation, COPY TO',"
        [ -s "$T/tls12.dat" ] && p="$p '$T/tls12.dat' using (\$2+0.08):7:8:9 with yerrorlines ls 4 title 'TLS 1.2 renegotiation, COPY FROM',"
        [ -n "$B_TO" ] && p="$p $B_TO with lines lc rgb '#1f77b4' dt 3 lw 1.5 title '(b) no TLS, COPY TO',"
        [ -n "$B_FROM" ] && p="$p $B_FROM with lines lc rgb '#d62728' dt 3 lw 1.5 title '(b) no TLS, COPY FROM',"
        [ -n "$C_TO" ] && p="$p $C_TO with lines lc rgb '#1f77b4' dt 4 lw 1.5 title '(c) TLS 1.3 stock, COPY TO',"
        [ -n "$C_FROM" ] && p="$p $C_FROM with lines lc rgb '#d62728' dt 4 lw 1.5 title '(c) TLS 1.3 stock, COPY FROM',"
        echo "${p%,}"
    } >"$T/plot.gp"
    if gnuplot "$T/plot.gp" 2>"$T/gnuplot.err"; then
        log "plot: $OUT/plot.png"
    else
        cat "$T/gnuplot.err" >&2
        log "gnuplot failed; no plot"
    fi
else
    log "gnuplot not installed; no plot"
fi

cat "$RESULT"
log "results: $RESULT, $OUT/$STAMP.csv"
