#!/usr/bin/env bash
# citus_build.sh -- Citus built once into a cache, for test/t/063_citus.pl, and
# installed into a PostgreSQL installation.
#
#   scripts/citus_build.sh PG_CONFIG     (as root)
#
# The source: the tarball citus-*.tar.xz of SSLR_CITUS_SOURCES (default
# ../shared/citus-src beside the checkout), checked against that
# directory's SHA256SUMS (a tarball it does not list is refused).  Citus
# 13.2 builds against PostgreSQL 16 and 17 (not Debian 12's 15.20: see
# docs/citus.md).  The build is kept in $SSLR_CITUS_CACHE/NAME (NAME: the
# tarball's name, the first 12 digits of its checksum and of the
# PostgreSQL build's identity -- its version, configure line, flags and
# the marker pg_build.sh left), with a marker written last; a later run,
# for that PostgreSQL build or a copy of it, only copies its files into
# PG_CONFIG's installation (pkglibdir, sharedir/extension), which takes a
# second.  Prints that installation's pkglibdir as its last line; fails
# with the reason (for a failed build: the compiler's first errors).
#
# Environment: SSLR_CITUS_CACHE (default /var/cache/ssl_renegotiate/citus),
# SSLR_CITUS_SOURCES, SSLR_PG_JOBS (default: the number of CPUs).
set -euo pipefail

PG_CONFIG=${1:-}
if [ -z "$PG_CONFIG" ] || [ ! -x "$PG_CONFIG" ]; then echo "usage: $0 PG_CONFIG" >&2; exit 2; fi
[ "$(id -u)" -eq 0 ] || { echo "citus_build.sh: run as root" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SSLR_CITUS_CACHE:-/var/cache/ssl_renegotiate/citus}
JOBS=${SSLR_PG_JOBS:-$(nproc)}
SOURCES=${SSLR_CITUS_SOURCES:-}
[ -n "$SOURCES" ] || [ ! -d "$HERE/../../shared/citus-src" ] || SOURCES=$(cd "$HERE/../../shared/citus-src" && pwd)

die() { printf 'citus_build.sh: %s\n' "$*" >&2; exit 1; }
log() { printf '==> citus_build: %s\n' "$*" >&2; }

# ------------------------------------------------------------- the source
[ -n "$SOURCES" ] || die "no Citus source directory (SSLR_CITUS_SOURCES)"
[ -d "$SOURCES" ] || die "no Citus source directory $SOURCES"
tarball=$(find "$SOURCES" -maxdepth 1 -name 'citus-*.tar.xz' | sort -V | tail -n 1)
[ -n "$tarball" ] || die "no citus-*.tar.xz in $SOURCES"
[ -f "$SOURCES/SHA256SUMS" ] || die "no SHA256SUMS beside $tarball"
sum=$(awk -v f="${tarball##*/}" '$2 == f || $2 == "*" f { print $1 }' "$SOURCES/SHA256SUMS")
[ -n "$sum" ] || die "${tarball##*/} is not listed in $SOURCES/SHA256SUMS"
[ "$(sha256sum <"$tarball" | cut -d' ' -f1)" = "$sum" ] ||
    die "${tarball##*/} does not match its checksum in SHA256SUMS"

# ------------------------------------------- the PostgreSQL build's identity
pg_prefix=$(dirname "$("$PG_CONFIG" --bindir)")
pg_id=$({
    "$PG_CONFIG" --version --configure --cflags --cppflags --ldflags
    cat "$pg_prefix/.ssl_renegotiate-built" 2>/dev/null || true
} | sha256sum | cut -c1-12)
base=${tarball##*/}
NAME=${base%.tar.xz}-${sum:0:12}-pg$pg_id
STAGE=$CACHE/$NAME
MARKER=$STAGE/.ssl_renegotiate-built

mkdir -p "$CACHE"
exec 9>"$CACHE/.$NAME.lock"
flock -n 9 || { log "waiting for the build under way"; flock 9; }

if [ -f "$MARKER" ] && [ -f "$STAGE/lib/citus.so" ]; then
    log "cached: $(head -n 1 "$MARKER")"
else
    . "$HERE/packages.sh"
    # shellcheck disable=SC2086 # a list of words
    sslr_install_packages $SSLR_CITUS_PACKAGES
    work=$CACHE/src/$NAME
    rm -rf "$work" "$STAGE"
    mkdir -p "$work"
    log "building ${tarball##*/} against PostgreSQL $("$PG_CONFIG" --version | awk '{ print $2 }')"
    tar -xJf "$tarball" -C "$work"
    srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'citus-*' | head -n 1)
    [ -n "$srcdir" ] || die "${tarball##*/} unpacks into no citus-* directory"
    (
        cd "$srcdir"
        ./configure PG_CONFIG="$PG_CONFIG" >"$work/configure.log" 2>&1 ||
            { tail -n 30 "$work/configure.log" >&2; exit 1; }
        make -s -j"$JOBS" >"$work/build.log" 2>&1 ||
            { grep -E -m 5 'error:|Error [0-9]' "$work/build.log" >&2; tail -n 40 "$work/build.log" >&2; exit 1; }
        make -s install DESTDIR="$work/destdir" >>"$work/build.log" 2>&1 ||
            { tail -n 40 "$work/build.log" >&2; exit 1; }
    ) || {
        reason=$(grep -h -E -m 1 '^configure: error:| error: ' "$work/configure.log" "$work/build.log" \
            2>/dev/null | head -n 1 || true)
        die "the build of ${tarball##*/} failed${reason:+: $reason} (logs in $work)"
    }
    # what an installation needs: the libraries and the extension's files
    mkdir -p "$STAGE/lib" "$STAGE/extension"
    cp -a "$work/destdir$("$PG_CONFIG" --pkglibdir)"/. "$STAGE/lib/"
    cp -a "$work/destdir$("$PG_CONFIG" --sharedir)/extension"/. "$STAGE/extension/"
    [ -f "$STAGE/lib/citus.so" ] || die "the build of ${tarball##*/} installed no citus.so"
    echo "${tarball##*/} ($sum) for PostgreSQL $("$PG_CONFIG" --version | awk '{ print $2 }') ($pg_id)" >"$MARKER"
    rm -rf "$work"
    log "built into $STAGE"
fi

# ---------------------------------------------------------- the install
# Each file renamed into place, and only where it differs: a server
# running meanwhile keeps the file it loaded (a copy over it in place
# would change the library under it).
install_tree() {
    local from=$1 to=$2 f
    (cd "$from" && find . -type f) | while IFS= read -r f; do
        f=${f#./}
        cmp -s "$from/$f" "$to/$f" && continue
        mkdir -p "$(dirname "$to/$f")"
        cp "$from/$f" "$to/$f.citus-tmp.$$"
        mv -f "$to/$f.citus-tmp.$$" "$to/$f"
    done
}
install_tree "$STAGE/lib" "$("$PG_CONFIG" --pkglibdir)"
install_tree "$STAGE/extension" "$("$PG_CONFIG" --sharedir)/extension"
log "installed into $pg_prefix"
"$PG_CONFIG" --pkglibdir
