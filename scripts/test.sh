#!/usr/bin/env bash
# test.sh -- the project's test command (README, CI's .ci/run).  Run as root.
#
# For each cell in SSLR_CELLS (default "15 16 17 18 19 18/3.5 20:build"):
#   MAJOR         that major with the system's OpenSSL: "15" is Debian 12's
#                 package; another major is built once into a cache by
#                 scripts/pg_build.sh (from a tarball of SSLR_PG_SOURCES,
#                 default ../shared/pg-src, checked against its SHA256SUMS;
#                 where there is none, Debian's source package; or the
#                 tree SSLR_PG_SOURCE);
#   MAJOR/SERIES  that major against another OpenSSL series (built once by
#                 scripts/openssl_build.sh), e.g. "18/3.5";
#   MAJOR:build   only built: the extension compiled and installed with
#                 -Wall -Wextra -Werror against that major (a development
#                 branch, e.g. "20:build"); one check, no tests.
# SSLR_PG_MAJORS (e.g. "15") instead gives cells of the system's OpenSSL
# only.  The run has a directory of its own, mktemp -d
# /tmp/ssl_renegotiate-test.XXXXXX (or SSLR_WORKDIR, held under a lock:
# a second run given the same one stops), removed at the end if nothing
# failed, else kept for inspection; in it each cell has its own work
# directory, named after the cell (15, 18, 18-openssl-3.5), and the Debian
# package test its own (package).  First, the packages of SSLR_NEEDS=test
# (scripts/packages.sh) are installed, whatever the cells: the script
# itself uses the openssl program and the user postgres, before a cell's
# setup; and scripts/pgindent_build.sh makes pgindent ready for make
# lint's indent-check (cached).  Then, per cell:
#   1. scripts/setup.sh: packages (the build's and the tests', SSLR_NEEDS
#      test), a copy of the tree in a postgres-owned work directory of that
#      major, a build with -Wall -Wextra -Werror, make install;
#   2. as postgres in that directory:
#        make USE_PGXS=1 PG_CONFIG=... PROVE_JOBS=N LINT_JOBS=N check-all
#      i.e. make lint, pg_regress (test/sql/, test/expected/, its own temporary
#      instance) and then prove over test/t/*.pl (PGXS TAP support), N files at
#      once in lint and in prove (SSLR_PROVE_JOBS, default the number of
#      CPUs);
#   3. on failure prints regression.diffs and the tails of the TAP logs;
#   4. prints "PostgreSQL VERSION (SOURCE) / OpenSSL V: N passed, N failed"
#      (VERSION pg_config's, e.g. 19beta2; SOURCE what was built: Debian
#      package, Debian source 18.6-3, tarball, git tree; V the version the
#      cell's openssl program reports, e.g. 3.0.19, 3.5.7); a build-only
#      cell "PostgreSQL 20devel (tarball): builds: 1 passed, 0 failed".
# In the cell 17, before its setup, scripts/citus_build.sh installs Citus
# (built once into a cache) for test/t/063_citus.pl; a Citus that cannot be
# built counts one failure (test/t/063 then skips), and its time is on the
# cell's time line.
# In the cell 15, while its suite runs, scripts/leave_alone_test.sh: the
# demo run at the same time, leaving a running 15/main and exporter service
# as they were; its line is "Machine left alone: N passed, N failed".
# After the cells, if those of 17 and 19 (the system's OpenSSL) were set
# up: test/t/049_pg_upgrade.pl, which the cells skip, once, by 19's harness with
# 17's installation in oldinstall, in its own work directory (pg_upgrade);
# its line is "pg_upgrade 17 -> 19: N passed, N failed".
# Then, if the cell 15 is among them, scripts/package_test.sh: the Debian
# package built, linted, installed and tested on its installed files; its
# line is "Debian package: N passed, N failed"; then scripts/patroni_test.sh
# on Debian's 15 with the extension the package installed: three nodes
# under Patroni and etcd through the SIGKILL of their leader, in its own
# work directory (patroni); its line is "Patroni cluster: N passed, N
# failed".  Last, every shell example of README.md and docs/ must have run
# and passed (scripts/doc_examples.pl check): "Documentation examples: N
# passed, N failed".
# Once the first cell is set up, the PostgreSQL builds of the later cells
# run ahead in the background, at the lowest priority (SSLR_NO_PREBUILD=1:
# each in its turn only).  A cell that cannot be built or set up counts as
# one failure, with the reason; it never silently drops out.  The last line is the total
# "N passed, N failed"; the exit status is non-zero if anything failed.
#
# Counting: pg_regress counts tests (one per test/sql/ file): "All N tests
# passed." / "F of M tests failed." (summed over all pg_regress runs).
# From prove we count *assertions*: passed = Tests=M minus failed
# assertions; failed = for each test file that failed in prove's "Test
# Summary Report" its "Failed: F" count, but at least 1 (a file that died,
# bailed out, had a bad plan or a non-zero exit reports Failed: 0 although it
# failed; a file listed there only for a passing TODO test did not fail).
# If make failed and nothing was counted as failed, 1 failure is reported.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
. "$(dirname "${BASH_SOURCE[0]}")/copy_tree.sh"

sslr_require_root test.sh

if [ -n "${SSLR_CELLS:-}" ]; then
    CELLS=$SSLR_CELLS
elif [ -n "${SSLR_PG_MAJORS:-}" ]; then
    CELLS=$SSLR_PG_MAJORS
else
    CELLS="15 16 17 18 19 18/3.5 20:build"
fi
export SSLR_OPENSSL_CACHE=${SSLR_OPENSSL_CACHE:-/var/cache/ssl_renegotiate/openssl}
# the packages setup.sh installs: the build's and the tests'
export SSLR_NEEDS=test
# ... installed now, before the first cell builds its PostgreSQL: this
# script uses some of them itself, whatever the cells -- the openssl
# program (each cell's line names its version) and the user postgres
# (postgresql-common makes it), who owns the directory of ports below.
. "$SSLR_REPO/scripts/packages.sh"
# First what the builds ahead need (pg_build.sh, openssl_build.sh,
# citus_build.sh), so that they start while apt installs the rest and never
# run apt themselves; then the rest
# shellcheck disable=SC2086 # lists of packages
sslr_install_packages $SSLR_BUILD_PACKAGES $SSLR_PG_BUILD_PACKAGES $SSLR_OPENSSL_BUILD_PACKAGES \
    $SSLR_CITUS_PACKAGES
id -u postgres >/dev/null ||
    { echo "test.sh: there is no user postgres, although postgresql-common is installed" >&2; exit 1; }
# this run's directory: its cells' work directories, nobody else's
if [ -n "${SSLR_WORKDIR:-}" ]; then
    RUN_DIR=$SSLR_WORKDIR
    mkdir -p "$RUN_DIR"
    exec {run_lock}>"$RUN_DIR/.ssl_renegotiate-run.lock"
    flock -n "$run_lock" || { echo "test.sh: $RUN_DIR is in use by another run" >&2; exit 1; }
else
    RUN_DIR=$(mktemp -d /tmp/ssl_renegotiate-test.XXXXXX)
fi
chmod 755 "$RUN_DIR"
# Which of the documentation's shell examples ran, and how (each runner
# appends to it: scripts/doc_examples.pl run); checked at the end.  The
# TAP files append as postgres.
export SSLR_DOC_EXAMPLES_LOG=$RUN_DIR/doc-examples.log
: >"$SSLR_DOC_EXAMPLES_LOG"
chmod 666 "$SSLR_DOC_EXAMPLES_LOG"
# this run is the README's test command when .ci/run started it through
# that block, or when the block is exactly this script with no argument
if [ "${SSLR_DOC_EXAMPLE:-}" = test-command ] ||
    [ "$(perl "$SSLR_REPO/scripts/doc_examples.pl" show test-command)" = ./scripts/test.sh ]; then
    echo "ok test-command" >>"$SSLR_DOC_EXAMPLES_LOG"
fi
LOG=$(mktemp /tmp/ssl_renegotiate-installcheck.XXXXXX)
BUILD_ERR=$(mktemp /tmp/ssl_renegotiate-build-err.XXXXXX)
# TAP files at once in a cell (a file leaves most of a CPU idle, waiting on
# its clients and servers), and one directory where every file of every
# cell locks the ports it takes
PROVE_JOBS=${SSLR_PROVE_JOBS:-$(nproc)}
PORT_DIR=$(mktemp -d /tmp/ssl_renegotiate-ports.XXXXXX)
chown postgres "$PORT_DIR"
PREBUILD_PID=
PREBUILD_LOG=$(mktemp /tmp/ssl_renegotiate-prebuild.XXXXXX)
trap '[ -z "$PREBUILD_PID" ] || kill -- "-$PREBUILD_PID" 2>/dev/null; rm -rf "$LOG" "$BUILD_ERR" "$PREBUILD_LOG" "$PORT_DIR"' EXIT

# The cells' PostgreSQL builds, ahead of their turn: a background job builds
# them one after another at the lowest CPU and I/O priority while apt
# installs the test's packages and the suites of earlier cells run (a suite
# leaves about one core idle, a build of the next cell takes it); Citus
# right after 17's.  Each build holds its cache's lock (pg_build.sh,
# citus_build.sh), so a cell whose build is under way waits for it and then
# finds it cached; a build that failed here is tried again in the cell's
# turn, which gives the reason.  The builds run in the cells' order, but a
# build-only cell last of all: what is left after the last build is then
# only a compilation of the extension.  On a fresh machine the builds are
# the run's critical path; once cached, the suites are.
prebuild_start() {
    [ -z "$PREBUILD_PID" ] || return 0
    local c order=() last=()
    for c in $CELLS; do
        case "$c" in
            *:build) last+=("${c%:build}") ;;
            *) order+=("$c") ;;
        esac
    done
    # its own process group (setsid), so that an interrupted run ends the
    # whole build with it
    setsid bash -c '
        repo=$1
        shift
        for c in "$@"; do
            m=${c%%/*}
            se=
            [ "$c" = "$m" ] || se=${c#*/}
            [[ "$m" =~ ^[0-9]+$ ]] || continue
            [ "$m${se:+/$se}" != 15 ] || [ -n "${SSLR_PG_SOURCE:-}" ] || continue
            prefix=$(nice -n 19 ionice -c 3 bash "$repo/scripts/pg_build.sh" "$m" $se 2>/dev/null | tail -n 1) ||
                continue
            if [ "$m${se:+/$se}" = 17 ] && [ -x "$prefix/bin/pg_config" ]; then
                nice -n 19 ionice -c 3 bash "$repo/scripts/citus_build.sh" "$prefix/bin/pg_config" \
                    >/dev/null 2>&1 || true
            fi
        done
    ' prebuild "$SSLR_REPO" "${order[@]}" "${last[@]}" >>"$PREBUILD_LOG" 2>&1 &
    PREBUILD_PID=$!
}
[ -n "${SSLR_NO_PREBUILD:-}" ] || prebuild_start
# shellcheck disable=SC2046 # a list of packages
sslr_install_packages $(sslr_packages_for $SSLR_NEEDS)

# What one major's "make installcheck" in $WORKDIR left in $LOG, with $rc:
# sets passed and failed, and shows what failed.
# shellcheck disable=SC2031 # rc is run_counted's, set in this shell
count_results() {
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
    # scripts/package_test.sh's own checks (building, lintian, installing,
    # the files on disk), scripts/leave_alone_test.sh's,
    # scripts/patroni_test.sh's and scripts/doc_examples.pl check's, one line each
    passed=$((passed + $(grep -Ec '^(package|machine|patroni) check ok: |^documentation example ok: ' "$LOG" || true)))
    failed=$((failed + $(grep -Ec '^(package|machine|patroni) check FAILED: |^documentation example FAILED' "$LOG" || true)))
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
            /^test\/t\/[^ ]+\.pl +\(Wstat: / {
                flush()
                name = $1; sub(/^test\/t\//, "", name); sub(/\.pl$/, "", name)
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
        # TAP test files prove listed as failed: "test/t/NAME.pl (Wstat: ..."
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
}

total_passed=0
total_failed=0
summary=()
timings=()    # "time: LABEL: build B, setup S, tests T", one per cell
minutes() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }
# run_counted LABEL COMMAND...: run it with its output in $LOG, count it
# (count_results), add "LABEL: N passed, N failed" to the summary and the
# counts to the totals.
run_counted() {
    local label=$1
    shift
    set +e
    "$@" 2>&1 | tee "$LOG"
    rc=${PIPESTATUS[0]}
    set -e
    count_results
    summary+=("$label: $passed passed, $failed failed")
    total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed))
}
# cell_label PG_CONFIG: "PostgreSQL 19beta2 (tarball)", what a cell ran on
cell_label() {
    local pg_config=$1 origin
    origin="Debian package"
    [ "$pg_config" = /usr/lib/postgresql/15/bin/pg_config ] ||
        origin=$(cat "$(dirname "$(dirname "$pg_config")")/.ssl_renegotiate-origin" 2>/dev/null || echo built)
    echo "PostgreSQL $("$pg_config" --version | awk '{ print $2 }') ($origin)"
}
# fail_cell LABEL WHY: the cell counts one failure, and says why
fail_cell() {
    summary+=("$1: $2: 0 passed, 1 failed")
    total_failed=$((total_failed + 1))
}
# The Debian package for Debian's PostgreSQL 15 (scripts/package_test.sh):
# built, linted, installed, then pg_regress and one TAP file on the
# installed files.
# Run right after the cell 15, whose installation it replaces, while the
# builds of later cells go on: it needs none of them.
package_and_patroni() {
    echo
    echo "=============== Debian package ==============="
    export SSLR_PACKAGE_WORKDIR=$RUN_DIR/package
    WORKDIR=$SSLR_PACKAGE_WORKDIR/test    # where count_results finds the test logs
    package_start=$SECONDS
    run_counted "Debian package" bash "$SSLR_REPO/scripts/package_test.sh"
    timings+=("time: Debian package: $(minutes $((SECONDS - package_start)))")

    # A Patroni cluster of Debian's 15, with the extension just installed
    # (scripts/patroni_test.sh), its ports reserved beside the TAP tests'
    echo
    echo "=============== Patroni cluster ==============="
    export SSLR_PATRONI_WORKDIR=$RUN_DIR/patroni
    WORKDIR=$SSLR_PATRONI_WORKDIR    # its logs, kept if it failed
    patroni_start=$SECONDS
    run_counted "Patroni cluster" env PG_TEST_PORT_DIR="$PORT_DIR" \
        bash "$SSLR_REPO/scripts/patroni_test.sh" /usr/lib/postgresql/15/bin
    timings+=("time: Patroni cluster: $(minutes $((SECONDS - patroni_start)))")
}
# full_cell CELL: true if the cell runs the whole suite (SSLR_FULL_CELLS)
FULL_CELLS=${SSLR_FULL_CELLS:-15 18}
full_cell() {
    [ "$FULL_CELLS" = all ] || [[ " $FULL_CELLS " == *" $1 "* ]]
}
# cell_tap_files CELL KIND: the TAP files test/t/cells.txt gives that cell
# (listed for its kind, major or openssl, or for the cell by name), one
# line of words; fails, saying why on stdout, if the list names a file
# that does not exist or gives none
cell_tap_files() {
    local list f missing=()
    list=$(awk -v cell="$1" -v kind="$2" '
        /^#/ || NF == 0 { next }
        { for (i = 2; i <= NF; i++) if ($i == kind || $i == cell) { print "test/t/" $1; next } }
    ' "$SSLR_REPO/test/t/cells.txt")
    for f in $list; do
        [ -f "$SSLR_REPO/$f" ] || missing+=("$f")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "names files that do not exist: ${missing[*]}"
        return 1
    fi
    [ -n "$list" ] || { echo "no file for $2"; return 1; }
    # shellcheck disable=SC2086 # one line of words
    echo $list
}
# pgindent, which make lint's indent-check needs in the full cells, if any
# (scripts/pgindent_build.sh: from the pinned PostgreSQL 18 tarball, cached)
for c in $CELLS; do
    case "$c" in *:build) continue ;; esac
    full_cell "$c" || continue
    if ! bash "$SSLR_REPO/scripts/pgindent_build.sh" >/dev/null 2>"$BUILD_ERR"; then
        cat "$BUILD_ERR" >&2
        fail_cell "pgindent (for make lint)" "could not be built ($(tail -n 1 "$BUILD_ERR"))"
    fi
    break
done
# the cells of the system's OpenSSL set up so far: their pg_config, by major
declare -A cell_pg_config=()
use_fd=
package_done=
for cell in $CELLS; do
    # the previous cell's prefix is no longer in use
    [ -z "$use_fd" ] || exec {use_fd}>&-
    use_fd=
    build_only=
    case "$cell" in
        *:build) build_only=1 cell=${cell%:build} ;;
    esac
    major=${cell%%/*}
    series=
    [ "$cell" = "$major" ] || series=${cell#*/}
    name=$major${series:+-openssl-$series}
    label="PostgreSQL $major / OpenSSL ${series:-of the system}"
    echo
    echo "=============== $label${build_only:+ (build only)} ==============="
    if ! [[ "$major" =~ ^[0-9]+$ ]] || { [ -n "$series" ] && ! [[ "$series" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]]; }; then
        echo "test.sh: '$cell' is no cell (MAJOR, MAJOR/OPENSSL_SERIES or MAJOR:build)" >&2
        fail_cell "$label" "no such cell"
        continue
    fi
    cell_start=$SECONDS
    if [ "$name" = 15 ] && [ -z "${SSLR_PG_SOURCE:-}" ]; then
        pg_config=/usr/lib/postgresql/15/bin/pg_config
    else
        # shellcheck disable=SC2086 # series: empty, or one argument
        prefix=$(bash "$SSLR_REPO/scripts/pg_build.sh" "$major" $series 2>"$BUILD_ERR" | tail -n 1) ||
            prefix=
        cat "$BUILD_ERR" >&2
        if [ -z "$prefix" ]; then
            # why: the first of openssl_build.sh's and pg_build.sh's last words
            reason=$(grep -E -m 1 '^(pg|openssl)_build\.sh: ' "$BUILD_ERR" | sed -E 's/^[a-z_]+\.sh: //' || true)
            echo "test.sh: PostgreSQL $major${series:+ with OpenSSL $series} could not be built (see above)"
            fail_cell "$label" "could not be built (${reason:-see above})"
            continue
        fi
        # in use until the next cell: another run's pg_build.sh replaces it
        # (a changed SSLR_PG_SOURCE tree) only once this lock is let go;
        # one under way now is complete once the lock is had
        exec {use_fd}>>"$(dirname "$prefix")/.$(basename "$prefix").use"
        flock -s "$use_fd"
        if [ ! -f "$prefix/.ssl_renegotiate-built" ]; then
            fail_cell "$label" "$prefix was replaced by another run's build, which failed"
            continue
        fi
        pg_config=$prefix/bin/pg_config
    fi
    # each cell its own work directory
    workdir_opt=$RUN_DIR/$name
    # the version the cell's OpenSSL reports (3.0.19; series 3.5: 3.5.7)
    openssl_bin=openssl
    [ -z "$series" ] || openssl_bin=$SSLR_OPENSSL_CACHE/$series/bin/openssl
    label=$(cell_label "$pg_config")
    if [ -z "$build_only" ]; then
        if ! openssl_version=$("$openssl_bin" version | awk '{ print $2 }') || [ -z "$openssl_version" ]; then
            fail_cell "$label" "its openssl program ($openssl_bin) does not run"
            continue
        fi
        label+=" / OpenSSL $openssl_version"
    fi
    build_end=$SECONDS
    # the cell 17: Citus too, for test/t/063 (scripts/citus_build.sh, cached)
    citus=
    if [ "$name" = 17 ] && [ -z "$build_only" ]; then
        citus=1
        echo "=== Citus for test/t/063 (scripts/citus_build.sh) into $pg_config ==="
        if ! bash "$SSLR_REPO/scripts/citus_build.sh" "$pg_config" >/dev/null 2>"$BUILD_ERR"; then
            cat "$BUILD_ERR" >&2
            reason=$(grep -E -m 1 '^citus_build\.sh: ' "$BUILD_ERR" | sed -E 's/^citus_build\.sh: //' || true)
            fail_cell "$label" "Citus could not be built (${reason:-see above})"
        fi
    fi
    citus_end=$SECONDS
    echo "=== setup (packages, build with -Werror, install) for $pg_config ==="
    if ! WORKDIR=$(SSLR_PG_CONFIG=$pg_config sslr_setup "$workdir_opt"); then
        echo "test.sh: setup.sh failed for $label" >&2
        fail_cell "$label" "${build_only:+builds: }setup failed"
        continue
    fi
    setup_end=$SECONDS
    [ -n "$series" ] || cell_pg_config[$major]=$pg_config
    timing="time: $label: PostgreSQL built or cached $(minutes $((build_end - cell_start)))"
    [ -z "$citus" ] || timing+=", Citus built or cached $(minutes $((citus_end - build_end)))"
    timing+=", setup $(minutes $((setup_end - citus_end)))"
    if [ -n "$build_only" ]; then
        timings+=("$timing")
        echo "test.sh: the extension builds warning-free against $label and installs"
        summary+=("$label: builds: 1 passed, 0 failed")
        total_passed=$((total_passed + 1))
        continue
    fi
    # cell 15: the demo at the same time, leaving the machine's servers alone
    alone_pid=
    if [ "$name" = 15 ] && [ -z "${SSLR_PG_SOURCE:-}" ]; then
        echo "=== scripts/leave_alone_test.sh in the background (output: $RUN_DIR/leave_alone.log) ==="
        bash "$SSLR_REPO/scripts/leave_alone_test.sh" >"$RUN_DIR/leave_alone.log" 2>&1 &
        alone_pid=$!
    fi
    # the whole suite, or the TAP files of test/t/cells.txt for the cell's kind
    if full_cell "$cell"; then
        echo "=== make check-all in $WORKDIR (as postgres) ==="
        targets=(check-all)
    else
        kind=major
        [ -z "$series" ] || kind=openssl
        if ! tap_files=$(cell_tap_files "$cell" "$kind"); then
            fail_cell "$label" "test/t/cells.txt: $tap_files"
            continue
        fi
        read -ra tap_list <<<"$tap_files"
        label+=" (${#tap_list[@]} of $(find "$SSLR_REPO/test/t" -maxdepth 1 -name '*.pl' | wc -l) TAP files: test/t/cells.txt, $kind)"
        echo "=== pg_regress and the TAP files of test/t/cells.txt for $kind in $WORKDIR (as postgres) ==="
        targets=(check-not-preloaded check-preloaded check-tap "PROVE_TESTS=$tap_files")
    fi
    SSLR_PG_CONFIG=$pg_config PG_BINDIR=$(dirname "$pg_config") run_counted "$label" \
        sslr_as_postgres "$WORKDIR" PG_TEST_PORT_DIR="$PORT_DIR" \
        make USE_PGXS=1 PG_CONFIG="$pg_config" PROVE_JOBS="$PROVE_JOBS" LINT_JOBS="$PROVE_JOBS" "${targets[@]}"
    timings+=("$timing, tests $(minutes $((SECONDS - setup_end)))")
    if [ -n "$alone_pid" ]; then
        alone_rc=0
        wait "$alone_pid" || alone_rc=$?
        echo
        echo "=============== Machine left alone (scripts/leave_alone_test.sh) ==============="
        run_counted "Machine left alone" sh -c 'cat "$1"; exit "$2"' sh "$RUN_DIR/leave_alone.log" "$alone_rc"
    fi
    if [ "$name" = 15 ]; then
        package_and_patroni
        package_done=1
    fi
done

[ -z "$use_fd" ] || exec {use_fd}>&-
# a cell 15 that could not be set up skipped its turn: the package and
# Patroni still run, and count
if [[ " $CELLS " == *" 15 "* ]] && [ -z "$package_done" ]; then
    package_and_patroni
fi
# the builds ahead are done: every cell has had its turn
[ -z "$PREBUILD_PID" ] || wait "$PREBUILD_PID" 2>/dev/null || true
PREBUILD_PID=

# pg_upgrade from 17 to 19 (test/t/049_pg_upgrade.pl, which every cell skips):
# once the cells of both are set up, the extension is installed in both
# installations; 19's harness runs the file, in a work directory of its
# own (a copy of the tree), with 17's installation in oldinstall.  About
# 10 s.
if [ -n "${cell_pg_config[17]:-}" ] && [ -n "${cell_pg_config[19]:-}" ]; then
    echo
    echo "=============== pg_upgrade 17 -> 19 ==============="
    upgrade_start=$SECONDS
    old_prefix=$(dirname "$(dirname "${cell_pg_config[17]}")")
    new_pg_config=${cell_pg_config[19]}
    WORKDIR=$RUN_DIR/pg_upgrade    # its logs, kept if it failed
    mkdir -p "$WORKDIR"
    sslr_copy_tree "$SSLR_REPO" "$WORKDIR"
    chown -R postgres: "$WORKDIR"
    # both installations in use again (see the cells' use lock)
    upgrade_fds=()
    for pc in "${cell_pg_config[17]}" "$new_pg_config"; do
        p=$(dirname "$(dirname "$pc")")
        [ "$p" = /usr/lib/postgresql/15 ] && continue
        exec {fd}>>"$(dirname "$p")/.$(basename "$p").use"
        flock -s "$fd"
        upgrade_fds+=("$fd")
    done
    PG_BINDIR=$(dirname "$new_pg_config") run_counted "pg_upgrade 17 -> 19" \
        sslr_as_postgres "$WORKDIR" PG_TEST_PORT_DIR="$PORT_DIR" oldinstall="$old_prefix" \
        make USE_PGXS=1 PG_CONFIG="$new_pg_config" PROVE_TESTS=test/t/049_pg_upgrade.pl check-tap
    for fd in "${upgrade_fds[@]}"; do exec {fd}>&-; done
    timings+=("time: pg_upgrade 17 -> 19: $(minutes $((SECONDS - upgrade_start)))")
fi

# Every shell example of README.md and docs/ ran, and passed: the demo
# (leave_alone_test.sh) and the install recipes (package_test.sh) run in
# the cell 15's turn, make installcheck and promtool in test/t/070 of each
# full cell.
if [[ " $CELLS " == *" 15 "* ]]; then
    echo
    echo "=============== Documentation examples ==============="
    WORKDIR=$RUN_DIR/doc-examples    # no logs of its own
    mkdir -p "$WORKDIR"
    run_counted "Documentation examples" perl "$SSLR_REPO/scripts/doc_examples.pl" check "$SSLR_DOC_EXAMPLES_LOG"
fi

echo
printf '%s\n' "${timings[@]}" "time: all: $(minutes "$SECONDS")"
printf '%s\n' "${summary[@]}"
if [ "$total_failed" -eq 0 ] && [ -z "${SSLR_WORKDIR:-}" ]; then
    rm -rf "$RUN_DIR"
else
    echo "work directories kept for inspection in $RUN_DIR"
fi
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ] || exit 1
exit 0
