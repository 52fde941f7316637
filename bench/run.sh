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
#       d    TLS 1.3, extension, byte_limit = 0        cluster B   (accounting only)
#       e    TLS 1.3, extension, byte_limit = 64kB     cluster B
#       f    TLS 1.3, extension, byte_limit = 640kB    cluster B
#       g    TLS 1.3, extension, byte_limit = 512MB    cluster B   (the default)
#       h64  TLS 1.2, tls12 = renegotiate, 64kB   cluster B
#       h1M  TLS 1.2, tls12 = renegotiate, 1MB    cluster B
#     settings go per connection in the startup packet (options='-c ...');
#   * pgbench -S (TLS 1.3, many small messages) and pgbench -C -S (TLS
#     connection set-up) against A (c) and B (d, byte_limit = 0);
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
# This file hands over to postgres and sets up; the phases are sourced from
# bench/run/: setup.sh (certificates, clusters, data), runs.sh
# (configurations, verification pass, rounds), tables.sh (the report) and
# plot.sh.
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
#                              "a b c d e p f g h64 h1M"; c is always run)
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
    WORKDIR=$(SSLR_NEEDS=${SSLR_NEEDS:-bench} sslr_setup "${SSLR_WORKDIR:-/tmp/ssl_renegotiate-bench}")
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
ALL_CONFIGS="a b c d e p f g h64 h1M"
CONFIGS=${SSLR_BENCH_CONFIGS:-$ALL_CONFIGS}
case " $CONFIGS " in *" c "*) ;; *) CONFIGS="c $CONFIGS" ;; esac
for x in $CONFIGS; do
    case " $ALL_CONFIGS " in *" $x "*) ;; *) echo "run.sh: unknown configuration '$x'" >&2; exit 1 ;; esac
done

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 1; }

T=$(mktemp -d /tmp/sslr-bench.XXXXXX)
STARTED_A='' STARTED_B=''
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

# The phases, each in a file of its own; they share this shell's variables
# and functions.
BENCH=$(dirname "${BASH_SOURCE[0]}")
. "$BENCH/run/setup.sh"
. "$BENCH/run/runs.sh"
. "$BENCH/run/tables.sh"
. "$BENCH/run/plot.sh"
