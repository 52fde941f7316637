#!/usr/bin/env bash
# bench/reliability.sh -- the reliability tests at full size.  Run as root.
#
# The TAP tests test/t/040_churn.pl and test/t/041_many_sessions.pl run in CI with
# small defaults (2,000 connections, 300 sessions).  This script runs them
# at the sizes they were written for:
#
#   test/t/040_churn.pl          SSLR_CHURN_CONNECTIONS=20000: 20,000 TLS 1.3
#                           connections made and dropped by pgbench -C; the
#                           totals must equal exactly 20,000 times one
#                           connection's bytes and records (plus pgbench's
#                           own setup connection), no slot may leak, the log
#                           must stay clean;
#   test/t/041_many_sessions.pl  SSLR_MANY_SESSIONS=500: 500 concurrent TLS 1.3
#                           pgbench sessions rekeying every 1 kB and two
#                           20 MB COPYs at 64 kB, the view sampled against
#                           pg_stat_ssl; the time to read the view with 500
#                           rows and the extension's shared memory.
#
# Like scripts/demo.sh: scripts/setup.sh installs what is missing, builds
# and installs the extension and copies the tree into a work directory
# owned by postgres (default /tmp/ssl_renegotiate-reliability, so as not to
# disturb the other scripts' work directories); the tests then run there as
# postgres, each on throw-away clusters of their own (127.0.0.1 and a
# private Unix socket, ports chosen by PostgreSQL::Test::Cluster).
#
# Output: the test results and the figures the tests print (per-connection
# bytes, totals, connection rate, view read times, shared memory), on
# stdout and in bench/results/reliability-<date>.txt; the full TAP logs in
# the work directory's tmp_check/log/.
#
# It takes a while: 20,000 connections are 20,000 backend forks (at about
# 20-30 connections/s on a small, busy 2-core VM: 15 minutes or so).
#
# Environment:
#   SSLR_CHURN_CONNECTIONS   default 20000 (must be even)
#   SSLR_MANY_SESSIONS       default 500
#   SSLR_MANY_TX             transactions per pgbench session in 041 (default 20)
#   SSLR_RELIABILITY_TESTS   test files to run, default "040_churn 041_many_sessions"
#                            (test/t/042_faults.pl may be added; it has no size)
#   SSLR_WORKDIR             setup.sh's work directory
#                            (default /tmp/ssl_renegotiate-reliability)
# Quick check of the script itself:
#   sudo SSLR_CHURN_CONNECTIONS=200 SSLR_MANY_SESSIONS=50 bench/reliability.sh
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

# ===================================================================== root
if [ -z "${SSLR_RELIABILITY_INNER:-}" ]; then
    sslr_require_root reliability.sh
    echo "=== Setup: packages, build and install of ssl_renegotiate ===" >&2
    WORKDIR=$(SSLR_NEEDS=${SSLR_NEEDS:-bench} sslr_setup "${SSLR_WORKDIR:-/tmp/ssl_renegotiate-reliability}")
    OUTDIR=$WORKDIR/bench/reliability.out
    sslr_results_dir "$OUTDIR"
    rc=0
    # The rest runs as postgres, in the postgres-owned copy of the tree.
    sslr_as_postgres "$WORKDIR" \
        SSLR_RELIABILITY_INNER=1 SSLR_RELIABILITY_OUT="$OUTDIR" SSLR_RELIABILITY_REV="$(sslr_revision)" \
        SSLR_CHURN_CONNECTIONS="${SSLR_CHURN_CONNECTIONS:-20000}" \
        SSLR_MANY_SESSIONS="${SSLR_MANY_SESSIONS:-500}" \
        SSLR_MANY_TX="${SSLR_MANY_TX:-20}" \
        SSLR_RELIABILITY_TESTS="${SSLR_RELIABILITY_TESTS:-040_churn 041_many_sessions}" \
        bash "$WORKDIR/bench/reliability.sh" || rc=$?
    sslr_collect_results "$OUTDIR"
    exit "$rc"
fi

# ================================================================ postgres
export PATH="$PG_BINDIR:$PATH"
export LC_ALL=C
OUT=${SSLR_RELIABILITY_OUT:?}
PGXS_DIR=$(dirname "$(dirname "$(pg_config --pgxs)")")    # .../lib/pgxs/src
export PG_REGRESS=$PGXS_DIR/test/regress/pg_regress
export TESTDIR=$PWD
STAMP=$(date +%Y%m%d-%H%M%S)
RESULT=$OUT/reliability-$STAMP.txt

[ -x "$PG_REGRESS" ] || { echo "reliability.sh: $PG_REGRESS not found" >&2; exit 1; }
rm -rf tmp_check

{
    echo "ssl_renegotiate reliability run, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "revision: ${SSLR_RELIABILITY_REV:-unknown}; $(postgres --version); $(openssl version)"
    echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "SSLR_CHURN_CONNECTIONS=$SSLR_CHURN_CONNECTIONS SSLR_MANY_SESSIONS=$SSLR_MANY_SESSIONS SSLR_MANY_TX=$SSLR_MANY_TX"
} | tee "$RESULT"

rc=0
for t in $SSLR_RELIABILITY_TESTS; do
    f=test/t/$t.pl
    [ -f "$f" ] || { echo "reliability.sh: $f not found" >&2; rc=1; continue; }
    printf '\n==================== %s ====================\n' "$f" | tee -a "$RESULT"
    start=$(date +%s)
    if prove -I test/t -I "$PGXS_DIR/test/perl" "$f" 2>&1 | tee -a "$RESULT"; then trc=0; else trc=1; fi
    secs=$(($(date +%s) - start))
    echo "--> $f: $( [ "$trc" -eq 0 ] && echo PASS || echo FAIL ) in ${secs} s" | tee -a "$RESULT"
    [ "$trc" -eq 0 ] || rc=1
    # The figures: the tests' note() lines (and failures) from the TAP log,
    # without the echo of background psql sessions.
    log=tmp_check/log/regress_log_$t
    if [ -f "$log" ]; then
        echo "--- figures and failures from $log:" | tee -a "$RESULT"
        sed -E 's/^\[[0-9:.]+\]\([0-9.]+s\) //' "$log" |
            grep -E '^(not ok|# (churn|expected|one transaction|pgbench|run [0-9]|[0-9]+ TLS connections|read of|refrozen|running phase|sample while|copy[01]:|totals:|largest|shared memory|COPY data)|#   Failed)' |
            grep -vE '^# (pgbench -C|SELECT|WITH)' |
            cut -c1-400 | tee -a "$RESULT"
    fi
done

printf '\n%s\n' "$( [ "$rc" -eq 0 ] && echo "ALL PASSED" || echo "SOME FAILED" ) (results: $RESULT; logs: $PWD/tmp_check/log)" | tee -a "$RESULT"
exit "$rc"
