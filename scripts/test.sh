#!/usr/bin/env bash
# test.sh -- the project's test command (README, CI's .ci/run).  Run as root.
#
#   1. scripts/setup.sh: packages, copy of the tree in a postgres-owned work
#      directory, build, make install;
#   2. as postgres in that directory:
#        make USE_PGXS=1 PG_CONFIG=... installcheck
#      i.e. pg_regress (sql/, expected/, its own temporary instance) and then
#      prove over t/*.pl (PGXS TAP support);
#   3. on failure prints regression.diffs and the tails of the TAP logs;
#   4. prints a last line "N passed, N failed" and exits non-zero if
#      anything failed.
#
# Counting: pg_regress counts tests (one per sql/ file): "All N tests
# passed." / "F of M tests failed." (summed over all pg_regress runs).
# From prove we count *assertions*: passed = Tests=M minus failed
# assertions; failed = for each test file that failed in prove's "Test
# Summary Report" its "Failed: F" count, but at least 1 (a file that died,
# bailed out, had a bad plan or a non-zero exit reports Failed: 0 although it
# failed; a file listed there only for a passing TODO test did not fail).
# If make failed and nothing was counted as failed, 1 failure is reported.
# The exit status is non-zero whenever make failed, whatever was parsed.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PG_CONFIG=$PG_BINDIR/pg_config

sslr_require_root test.sh

echo "=== setup (packages, build, install) ==="
if ! WORKDIR=$(sslr_setup); then
    echo "test.sh: setup.sh failed" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

LOG=$(mktemp /tmp/ssl_renegotiate-installcheck.XXXXXX)
trap 'rm -f "$LOG"' EXIT

echo "=== make installcheck in $WORKDIR (as postgres) ==="
set +e
sslr_as_postgres "$WORKDIR" make USE_PGXS=1 PG_CONFIG="$PG_CONFIG" installcheck 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e

# Logs of one TAP test file (tmp_check/log/regress_log_NAME and
# NAME_<node>.log) or, with no argument, every log file in a log/ directory
# (TAP logs, pg_regress's OUTPUTDIR/log/postmaster.log, ...).
show_logs() {
    local f pat=${1:-}
    while IFS= read -r -d '' f; do
        if [ -n "$pat" ]; then
            case "${f##*/}" in
                "regress_log_$pat" | "${pat}"_*.log) ;;
                *) continue ;;
            esac
        fi
        echo "----- tail of $f -----"
        tail -n 80 "$f"
    done < <(find "$WORKDIR" -maxdepth 3 -type f -path '*/log/*' -print0 2>/dev/null | sort -z)
}

# ------------------------------------------------------------- counting
passed=0
failed=0
# pg_regress (the Makefile may run it more than once: sum every summary)
while read -r a b c k; do
    case "$a" in
        All) passed=$((passed + b)) ;;                # All N tests passed
        *) if [ "$c" = failed ]; then                 # F of T tests failed[,
               k=${k:-0}                              #  K of these failures ignored]
               passed=$((passed + b - a + k)); failed=$((failed + a - k))
           else                                       # P of T tests passed[,
               passed=$((passed + a))                 #  ... ignored]
           fi ;;
    esac
done < <(grep -Eo 'All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests (passed|failed)(, [0-9]+ of these failures ignored)?' "$LOG" |
         sed -E 's/^All ([0-9]+) .*/All \1 x/
                 s/^([0-9]+) of ([0-9]+) tests (passed|failed)(, ([0-9]+) of these.*)?$/\1 \2 \3 \5/')
# prove: its "Test Summary Report" lists a file that failed -- and also one
# that only had a TODO test pass, which is no failure.  One line per file that
# failed: "NAME FAILED_ASSERTIONS", where a file that died, had a bad plan or
# a non-zero exit status counts as at least one failure.
tap_failures() {
    awk '
        function flush() { if (name != "" && (nfail > 0 || broken)) print name, nfail; name = "" }
        /^Test Summary Report/ { insum = 1; next }
        /^Files=[0-9]+, Tests=/ { flush(); insum = 0 }
        !insum { next }
        /^t\/[^ ]+\.pl +\(Wstat: / {
            flush()
            name = $1; sub(/^t\//, "", name); sub(/\.pl$/, "", name)
            w = $0; sub(/^.*Wstat: /, "", w); sub(/ .*$/, "", w)
            nfail = $0; sub(/^.*Failed: /, "", nfail); sub(/\).*$/, "", nfail); nfail += 0
            broken = (w != "0")
            next
        }
        /^ +(Parse errors|Non-zero exit status|Non-zero wait status)/ { broken = 1 }
        END { flush() }
    ' "$LOG"
}
if m=$(grep -Eo 'Files=[0-9]+, Tests=[0-9]+' "$LOG" | tail -n 1) && [ -n "$m" ]; then
    tests=${m##*Tests=}
    fa=0    # failed assertions
    ff=0    # failures reported (>= 1 per failed file)
    while read -r _ n; do
        fa=$((fa + n))
        ff=$((ff + (n > 0 ? n : 1)))
    done < <(tap_failures)
    passed=$((passed + tests - fa))
    failed=$((failed + ff))
fi
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1
fi

if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ]; then
    echo
    echo "=== installcheck FAILED (make exit status $rc) ==="
    while IFS= read -r -d '' f; do
        echo "----- $f -----"
        head -c 200000 "$f"
        echo
    done < <(find "$WORKDIR" -name regression.diffs -print0 2>/dev/null)
    # TAP test files prove listed as failed: "t/NAME.pl (Wstat: ..."
    mapfile -t failed_tap < <(tap_failures | cut -d' ' -f1)
    if [ ${#failed_tap[@]} -gt 0 ]; then
        for n in "${failed_tap[@]}"; do show_logs "$n"; done
    else
        show_logs
    fi
fi

# CI shows only the tail of this output: repeat what failed right above the
# last line, after the (long) logs.
if [ "$rc" -ne 0 ] || [ "$failed" -ne 0 ]; then
    echo
    echo "=== summary of the failures ==="
    sed -n '/^Test Summary Report/,/^Result:/p' "$LOG"
    grep -E '^(Dubious|No plan found|Bailout|make(\[[0-9]+\])?: \*\*\*)|tests? failed' "$LOG" || true
    # the failing assertions, by name, from each file's own log
    find "$WORKDIR" -maxdepth 3 -type f -name 'regress_log_*' -print0 2>/dev/null |
        xargs -0 -r grep -HE 'not ok [0-9]+' 2>/dev/null | tail -n 40 || true
fi

echo
echo "$passed passed, $failed failed"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] || exit 1
exit 0
