#!/usr/bin/env bash
# pg_build.sh -- a PostgreSQL of another major than Debian 12's, built once
# from Debian's own source package into a cache, for the tests.
#
#   scripts/pg_build.sh MAJOR [OPENSSL_SERIES]     (as root)
#
# Prints the installation prefix as its last line (PREFIX/bin/pg_config),
# and fails with the reason if the major cannot be had (for a build that
# fails: the compiler's first errors).
#
#   1. Debian's source package postgresql-MAJOR, newest version first, from
#      the suites that carry PostgreSQL majors (scripts/debsrc.sh: a private
#      apt configuration under the cache, the system's apt sources are
#      never touched).
#   2. Its upstream tarball (a release tarball: no bison or flex needed) is
#      built with OpenSSL and TAP support and installed into
#      $SSLR_PG_CACHE/MAJOR; a marker records the version, and a later run
#      reuses the build.
#   3. With OPENSSL_SERIES (1.1.1, 3.5, ...): against that OpenSSL, built
#      first by scripts/openssl_build.sh, into $SSLR_PG_CACHE/MAJOR-openssl-SERIES;
#      otherwise against the system's.
#
# Environment: SSLR_PG_CACHE (default /var/cache/ssl_renegotiate/pg),
# SSLR_PG_JOBS (default: the number of CPUs).
set -euo pipefail

MAJOR=${1:-}
OPENSSL=${2:-}
[[ "$MAJOR" =~ ^[0-9]+$ ]] || { echo "usage: $0 MAJOR [OPENSSL_SERIES]" >&2; exit 2; }
[ -z "$OPENSSL" ] || [[ "$OPENSSL" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] ||
    { echo "usage: $0 MAJOR [OPENSSL_SERIES]" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "pg_build.sh: run as root" >&2; exit 2; }

CACHE=${SSLR_PG_CACHE:-/var/cache/ssl_renegotiate/pg}
NAME=$MAJOR${OPENSSL:+-openssl-$OPENSSL}
PREFIX=$CACHE/$NAME
MARKER=$PREFIX/.ssl_renegotiate-built
JOBS=${SSLR_PG_JOBS:-$(nproc)}

log() { printf '==> pg_build %s: %s\n' "$NAME" "$*" >&2; }
die() { printf 'pg_build.sh: PostgreSQL %s%s: %s\n' "$MAJOR" "${OPENSSL:+ with OpenSSL $OPENSSL}" "$*" >&2; exit 1; }

HERE=$(dirname "${BASH_SOURCE[0]}")
. "$HERE/debsrc.sh"
sslr_built_before "$MARKER" "$PREFIX/bin/pg_config" && { echo "$PREFIX"; exit 0; }

# ------------------------------------------------------------ build tools
. "$HERE/packages.sh"
sslr_install_packages gcc make perl libssl-dev libipc-run-perl bzip2 xz-utils \
    dpkg-dev debian-archive-keyring

# ------------------------------------------------------ another OpenSSL
# Its headers first (CPPFLAGS) and its libraries on the rpath (LDFLAGS):
# configure records both, so pg_config --cppflags/--ldflags hand them on to
# extensions built with PGXS, and every program and library of this build
# (postgres, psql, pgbench, libpq, an extension) loads that OpenSSL.  Its
# openssl program too (OPENSSL: configure reports its version).
ssl_flags=()
ssl_built=
if [ -n "$OPENSSL" ]; then
    ossl=$(bash "$HERE/openssl_build.sh" "$OPENSSL" | tail -n 1) && [ -d "$ossl/include" ] ||
        die "OpenSSL $OPENSSL could not be built"
    ssl_flags=(CPPFLAGS="-I$ossl/include" LDFLAGS="-L$ossl/lib -Wl,-rpath,$ossl/lib"
               OPENSSL="$ossl/bin/openssl")
    ssl_built=" against $(cat "$ossl/.ssl_renegotiate-built")"
fi

# ------------------------------------------------------------- download
work=$CACHE/src/$NAME
# bookworm and bookworm-security: Debian 12's own 15, for builds against
# another OpenSSL
chosen=$(sslr_debian_source "$CACHE/apt-$NAME" "$work" "postgresql-$MAJOR" . \
    bookworm bookworm-security trixie trixie-updates trixie-security forky sid experimental) ||
    die "no source package to build"
log "building $chosen$ssl_built"

srcdir=$(sslr_unpack_upstream "$work" "postgresql-$MAJOR") || die "cannot unpack the source package of $chosen"

# ---------------------------------------------------------------- build
rm -rf "$PREFIX"
(
    cd "$srcdir"
    ./configure --prefix="$PREFIX" --with-openssl --enable-tap-tests \
        --without-icu --without-readline --without-zlib --without-llvm \
        "${ssl_flags[@]}" \
        >"$work/configure.log" 2>&1 ||
        { tail -n 30 "$work/configure.log" >&2; exit 1; }
    # on failure: the compiler's errors first (the reason), then the tail
    make -s -j"$JOBS" world-bin >"$work/build.log" 2>&1 ||
        { grep -E -m 5 'error:|Error [0-9]' "$work/build.log" >&2; tail -n 40 "$work/build.log" >&2; exit 1; }
    make -s install-world-bin >>"$work/build.log" 2>&1 ||
        { tail -n 40 "$work/build.log" >&2; exit 1; }
) || {
    # the reason in one line: configure's error or the compiler's first
    reason=$(grep -h -E -m 1 '^configure: error:| error: ' "$work/configure.log" "$work/build.log" \
        2>/dev/null | head -n 1 || true)
    die "the build of $chosen$ssl_built failed${reason:+: $reason} (logs in $work)"
}
[ -x "$PREFIX/bin/pg_config" ] || die "the build of $chosen installed no pg_config"
echo "postgresql-$MAJOR $chosen$ssl_built" >"$MARKER"
rm -rf "$srcdir"
log "installed into $PREFIX"
echo "$PREFIX"
