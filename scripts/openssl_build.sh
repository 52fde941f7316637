#!/usr/bin/env bash
# openssl_build.sh -- an OpenSSL of another series than Debian 12's (3.0),
# built once from Debian's own source package into a cache, for the tests.
#
#   scripts/openssl_build.sh SERIES      (as root; SERIES: 1.1.1, 3.5, 3.6, 4.0, ...)
#
# Prints the installation prefix as its last line (PREFIX/include,
# PREFIX/lib/libssl.so, PREFIX/bin/openssl), and fails with the reason if
# the series cannot be had.
#
#   1. Debian's source package "openssl" of that series, newest version
#      first, from the suites that carry it (scripts/debsrc.sh: a private
#      apt configuration per suite under the cache); a series that no
#      readable suite serves is refused, saying which suites and why.
#   2. Its upstream tarball is built as shared libraries with the library
#      directory on the rpath (a program linked against it finds it without
#      LD_LIBRARY_PATH), without tests or documentation, and installed into
#      $SSLR_OPENSSL_CACHE/SERIES; a marker records the version, and a later
#      run reuses the build.
#
# Environment: SSLR_OPENSSL_CACHE (default /var/cache/ssl_renegotiate/openssl),
# SSLR_PG_JOBS (default: the number of CPUs).
set -euo pipefail

SERIES=${1:-}
[[ "$SERIES" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] || { echo "usage: $0 SERIES (e.g. 3.5)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "openssl_build.sh: run as root" >&2; exit 2; }

CACHE=${SSLR_OPENSSL_CACHE:-/var/cache/ssl_renegotiate/openssl}
PREFIX=$CACHE/$SERIES
MARKER=$PREFIX/.ssl_renegotiate-built
JOBS=${SSLR_PG_JOBS:-$(nproc)}

log() { printf '==> openssl_build %s: %s\n' "$SERIES" "$*" >&2; }
die() { printf 'openssl_build.sh: OpenSSL %s: %s\n' "$SERIES" "$*" >&2; exit 1; }

HERE=$(dirname "${BASH_SOURCE[0]}")
. "$HERE/debsrc.sh"
# one build of a series at a time: a second caller waits, then finds it cached
mkdir -p "$CACHE"
exec 9>"$CACHE/.$SERIES.lock"
flock -n 9 || { log "waiting for the build under way"; flock 9; }
sslr_built_before "$MARKER" "$PREFIX/include/openssl/opensslv.h" && { echo "$PREFIX"; exit 0; }
. "$HERE/packages.sh"
# libc6-dev: gcc alone cannot link (Debian makes it a Recommends)
# shellcheck disable=SC2086 # a list of words
sslr_install_packages $SSLR_OPENSSL_BUILD_PACKAGES

# ------------------------------------------------------------- download
# Only the suites that carry the series are read (each on its own: one that
# cannot be read hides no other): 1.1.1 is bullseye's, 3.0 bookworm's, 3.5
# trixie's; a later series is only in the development suites, forky, sid
# and experimental, whose Release files a mirror may serve expired.
case "$SERIES" in
    1.1.1) suites="bullseye bullseye-security" ;;
    3.0 | 3.0.*) suites="bookworm bookworm-security" ;;
    3.5 | 3.5.*) suites="trixie trixie-security" ;;
    1.* | 3.[0-4] | 3.[0-4].*) die "no Debian suite carries OpenSSL $SERIES (1.1.1: bullseye, 3.0: bookworm, 3.5: trixie; later series: forky, sid, experimental)" ;;
    *) suites="forky sid experimental" ;;
esac
work=$CACHE/src/$SERIES
err=$(mktemp)
trap 'rm -f "$err"' EXIT
# shellcheck disable=SC2086 # a list of suites
chosen=$(sslr_debian_source "$CACHE/apt-$SERIES" "$work" openssl "^${SERIES//./\\.}([.a-z~+-]|\$)" $suites 2>"$err") ||
    { cat "$err" >&2; die "no source package to build: $(tail -n 1 "$err")"; }
cat "$err" >&2
log "building $chosen"

srcdir=$(sslr_unpack_upstream "$work" openssl) || die "cannot unpack the source package of $chosen"

# ---------------------------------------------------------------- build
# build_sw/install_sw: libraries, engines/providers and the openssl program,
# no manual pages (1.1.1 has no build_sw: its "all" builds the same).
rm -rf "$PREFIX"
(
    cd "$srcdir"
    ./config --prefix="$PREFIX" --openssldir="$PREFIX/ssl" --libdir=lib \
        shared no-tests "-Wl,-rpath,$PREFIX/lib" >"$work/configure.log" 2>&1 ||
        { tail -n 30 "$work/configure.log" >&2; exit 1; }
    target=build_sw
    grep -q '^build_sw:' Makefile || target=all
    make -s -j"$JOBS" "$target" >"$work/build.log" 2>&1 ||
        { tail -n 40 "$work/build.log" >&2; exit 1; }
    make -s install_sw >>"$work/build.log" 2>&1 ||
        { tail -n 40 "$work/build.log" >&2; exit 1; }
) || die "the build of $chosen failed (logs in $work)"
[ -f "$PREFIX/include/openssl/opensslv.h" ] || die "the build of $chosen installed no headers"
"$PREFIX/bin/openssl" version >&2 || die "the openssl program of $chosen does not run"
echo "openssl $chosen" >"$MARKER"
rm -rf "$srcdir"
log "installed into $PREFIX"
echo "$PREFIX"
