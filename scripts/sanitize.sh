#!/usr/bin/env bash
# sanitize.sh -- run the TAP suites against an UndefinedBehaviorSanitizer
# build of ssl_renegotiate.  Run as root (like test.sh).
#
#   1. scripts/setup.sh (packages, work dir, normal build and install);
#   2. rebuilds the extension with -fsanitize=undefined (and bounds checks)
#      and installs that build;
#   3. runs every TAP test (test/t/*.pl) with the sanitizer runtimes preloaded
#      into every process, so that the postmaster and its backends (which
#      load our library) have them; reports go to a directory of files;
#   4. reinstalls the normal build, whatever happened, and fails if any
#      test failed or any sanitizer report was written.
#
# Only our library is instrumented: PostgreSQL and OpenSSL are Debian's
# builds.  AddressSanitizer cannot be used this way: with its runtime
# preloaded, Debian's postgres (and psql) deadlock at start-up inside
# glibc's bindtextdomain, before main does anything else.  Memory errors
# are looked for with valgrind instead (bench/memcheck.sh).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
PG_CONFIG=$PG_BINDIR/pg_config
PERL_TEST=/usr/lib/postgresql/15/lib/pgxs/src/test/perl
PG_REGRESS_BIN=/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress

sslr_require_root sanitize.sh

# shellcheck disable=SC2119 # the default work directory
WORKDIR=$(SSLR_NEEDS='test' sslr_setup)
REPORTS=$(mktemp -d /tmp/ssl_renegotiate-sanitizer.XXXXXX)
chown postgres "$REPORTS"

as_postgres() {
    sslr_as_postgres "$WORKDIR" "$@"
}

reinstall_normal() {
    as_postgres make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" clean >/dev/null
    as_postgres make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" >/dev/null
    make -s -C "$WORKDIR" USE_PGXS=1 PG_CONFIG="$PG_CONFIG" install >/dev/null
}
# the work directory (its own, mktemp) is kept for inspection if a test failed
trap 'rc=$?; reinstall_normal; [ "$rc" -ne 0 ] || rm -rf "$WORKDIR"' EXIT

echo "=== building with UBSan ==="
as_postgres make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" clean >/dev/null
as_postgres make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" \
    COPT='-fsanitize=undefined,bounds-strict -fno-sanitize-recover=all -fno-omit-frame-pointer -g -Wall -Wextra -Werror'
make -s -C "$WORKDIR" USE_PGXS=1 PG_CONFIG="$PG_CONFIG" install >/dev/null

preload="$(gcc -print-file-name=libubsan.so)"

echo "=== TAP tests with the sanitizer runtimes preloaded ==="
set +e
as_postgres env \
    LD_PRELOAD="$preload" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$REPORTS/ubsan" \
    PG_REGRESS="$PG_REGRESS_BIN" TESTDIR="$WORKDIR" \
    prove -I test/t -I "$PERL_TEST" test/t/*.pl
rc=$?
set -e

reports=$(find "$REPORTS" -type f | wc -l)
if [ "$reports" -gt 0 ]; then
    echo "sanitize.sh: $reports sanitizer report(s):"
    for f in "$REPORTS"/*; do echo "--- $f"; head -40 "$f"; done
fi
rm -rf "$REPORTS"
if [ "$rc" -ne 0 ] || [ "$reports" -gt 0 ]; then
    echo "sanitize.sh: FAILED (prove exit $rc, $reports reports)"
    exit 1
fi
echo "sanitize.sh: every TAP test passed under UBSan, no reports"
