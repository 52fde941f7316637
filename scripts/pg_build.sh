#!/usr/bin/env bash
# pg_build.sh -- a PostgreSQL of another major than Debian 12's, built once
# from Debian's own source package into a cache, for the tests.
#
#   scripts/pg_build.sh MAJOR        (as root)
#
# Prints the installation prefix as its last line (PREFIX/bin/pg_config),
# and fails with the reason if the major cannot be had.
#
#   1. A private apt configuration under the cache (sources list, lists,
#      archives) with deb-src lines for the Debian suites that carry
#      PostgreSQL majors, signed by debian-archive-keyring: the system's apt
#      sources are never touched.
#   2. Every version of postgresql-MAJOR those suites offer, newest first
#      (packages move between suites, and a mirror may list a version it
#      does not yet serve): the first one whose files download is taken.
#   3. Its upstream tarball (a release tarball: no bison or flex needed) is
#      built with OpenSSL and TAP support against the system's OpenSSL and
#      installed into $SSLR_PG_CACHE/MAJOR; a marker records the version,
#      and a later run reuses the build.
#
# Environment: SSLR_PG_CACHE (default /var/cache/ssl_renegotiate/pg),
# SSLR_PG_JOBS (default: the number of CPUs).
set -euo pipefail

MAJOR=${1:-}
[[ "$MAJOR" =~ ^[0-9]+$ ]] || { echo "usage: $0 MAJOR" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "pg_build.sh: run as root" >&2; exit 2; }

CACHE=${SSLR_PG_CACHE:-/var/cache/ssl_renegotiate/pg}
PREFIX=$CACHE/$MAJOR
MARKER=$PREFIX/.ssl_renegotiate-built
JOBS=${SSLR_PG_JOBS:-$(nproc)}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

log() { printf '==> pg_build %s: %s\n' "$MAJOR" "$*" >&2; }
die() { printf 'pg_build.sh: PostgreSQL %s: %s\n' "$MAJOR" "$*" >&2; exit 1; }

if [ -f "$MARKER" ] && [ -x "$PREFIX/bin/pg_config" ]; then
    log "cached: $(cat "$MARKER")"
    echo "$PREFIX"
    exit 0
fi

# ------------------------------------------------------------ build tools
. "$(dirname "${BASH_SOURCE[0]}")/packages.sh"
sslr_install_packages gcc make perl libssl-dev libipc-run-perl bzip2 xz-utils \
    dpkg-dev debian-archive-keyring

# ---------------------------------------------------- private apt sources
APT=$CACHE/apt
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$CACHE/src"
{
    for suite in trixie trixie-updates forky sid experimental; do
        echo "deb-src [signed-by=$KEYRING] http://deb.debian.org/debian $suite main"
    done
    echo "deb-src [signed-by=$KEYRING] http://deb.debian.org/debian-security trixie-security main"
} >"$APT/sources.list"
APT_OPTS=(-o "Dir::Etc::SourceList=$APT/sources.list" -o Dir::Etc::SourceParts=/nonexistent
          -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache"
          -o APT::Sandbox::User=root)
log "reading Debian's source indexes"
apt-get "${APT_OPTS[@]}" update -qq >&2 || die "apt-get update of the private sources failed"

mapfile -t versions < <(apt-cache "${APT_OPTS[@]}" showsrc "postgresql-$MAJOR" 2>/dev/null |
    awk '/^Version:/ { print $2 }' | sort -u | sort -r -V)
[ ${#versions[@]} -gt 0 ] || die "no Debian suite offers a source package postgresql-$MAJOR"

# ------------------------------------------------------------- download
work=$CACHE/src/$MAJOR
chosen=
for v in "${versions[@]}"; do
    rm -rf "$work"
    mkdir -p "$work"
    if (cd "$work" && apt-get "${APT_OPTS[@]}" source --download-only -qq "postgresql-$MAJOR=$v" >&2); then
        chosen=$v
        break
    fi
    log "version $v is listed but does not download; trying the next"
done
[ -n "$chosen" ] || die "none of the listed versions (${versions[*]}) could be downloaded"
log "building $chosen"

tarball=$(ls "$work"/postgresql-"$MAJOR"_*.orig.tar.* 2>/dev/null | head -n 1)
[ -n "$tarball" ] || die "no upstream tarball in the source package of $chosen"
tar -xf "$tarball" -C "$work"
srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'postgresql-*' | head -n 1)
[ -n "$srcdir" ] || die "the tarball of $chosen has no postgresql-* directory"

# ---------------------------------------------------------------- build
rm -rf "$PREFIX"
(
    cd "$srcdir"
    ./configure --prefix="$PREFIX" --with-openssl --enable-tap-tests \
        --without-icu --without-readline --without-zlib --without-llvm >"$work/configure.log" 2>&1 ||
        { tail -n 30 "$work/configure.log" >&2; exit 1; }
    make -s -j"$JOBS" world-bin >"$work/build.log" 2>&1 ||
        { tail -n 40 "$work/build.log" >&2; exit 1; }
    make -s install-world-bin >>"$work/build.log" 2>&1 ||
        { tail -n 40 "$work/build.log" >&2; exit 1; }
) || die "the build of $chosen failed (logs in $work)"
[ -x "$PREFIX/bin/pg_config" ] || die "the build of $chosen installed no pg_config"
echo "postgresql-$MAJOR $chosen" >"$MARKER"
rm -rf "$srcdir"
log "installed into $PREFIX"
echo "$PREFIX"
