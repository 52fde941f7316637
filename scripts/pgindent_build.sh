#!/usr/bin/env bash
# pgindent_build.sh -- PostgreSQL's pgindent, for make indent and make
# indent-check (run by make lint), built once into a cache.
#
#   scripts/pgindent_build.sh     (as root)
#
# From the newest postgresql-18*.tar.* of SSLR_PG_SOURCES (default
# ../shared/pg-src beside the checkout), checked against that directory's
# SHA256SUMS (scripts/pg_sources.sh: a tarball no checksum names, or one
# that does not match, is refused): src/tools/pgindent/pgindent and its
# typedefs.list, and pg_bsd_indent (src/tools/pg_bsd_indent) compiled
# against Debian's PostgreSQL 15 headers and its libpgport and libpgcommon
# (postgresql-server-dev-15) -- pgindent runs only with the pg_bsd_indent
# of its own release.  Into SSLR_PGINDENT_CACHE (default
# /var/cache/ssl_renegotiate/pgindent), with a marker naming the tarball
# and its checksum; a later run with the same tarball reuses it.  Prints
# the directory (pgindent, pg_bsd_indent, typedefs.list) as its last line;
# fails with the reason.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "pgindent_build.sh: run as root" >&2; exit 2; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SSLR_PGINDENT_CACHE:-/var/cache/ssl_renegotiate/pgindent}
SOURCES=${SSLR_PG_SOURCES:-}
[ -n "$SOURCES" ] || [ ! -d "$HERE/../../shared/pg-src" ] || SOURCES=$(cd "$HERE/../../shared/pg-src" && pwd)
die() { printf 'pgindent_build.sh: %s\n' "$*" >&2; exit 1; }
log() { printf '==> pgindent_build: %s\n' "$*" >&2; }

. "$HERE/pg_sources.sh"
. "$HERE/packages.sh"

[ -n "$SOURCES" ] || die "no directory of PostgreSQL tarballs (SSLR_PG_SOURCES)"
rc=0
found=$(sslr_pg_tarball "$SOURCES" 18) || rc=$?
[ "$rc" -ne 2 ] || die "no tarball postgresql-18* in $SOURCES"
[ "$rc" -eq 0 ] || die "$found"
sum=${found%% *}
tarball=${found#* }
key="${tarball##*/} $sum"

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock -n 9 || { log "waiting for the build under way"; flock 9; }
if [ -f "$CACHE/.ssl_renegotiate-built" ] && [ "$(cat "$CACHE/.ssl_renegotiate-built")" = "$key" ] &&
    [ -x "$CACHE/pg_bsd_indent" ] && [ -f "$CACHE/pgindent" ] && [ -f "$CACHE/typedefs.list" ]; then
    log "cached: ${tarball##*/}"
    echo "$CACHE"
    exit 0
fi

# shellcheck disable=SC2086 # a list of words
sslr_install_packages $SSLR_BUILD_PACKAGES xz-utils
includedir=$(/usr/lib/postgresql/15/bin/pg_config --includedir-server)
# Debian keeps libpgport.a and libpgcommon.a there
libdir=$(/usr/lib/postgresql/15/bin/pg_config --pkglibdir)

work=$(mktemp -d /tmp/ssl_renegotiate-pgindent.XXXXXX)
trap 'rm -rf "$work"' EXIT
# postgresql-18.4.tar.xz unpacks into postgresql-18.4/
top=${tarball##*/}
top=${top%.tar.*}
tar -xf "$tarball" -C "$work" "$top/src/tools/pg_bsd_indent" "$top/src/tools/pgindent" ||
    die "cannot unpack src/tools/ of ${tarball##*/}"
src=$work/$top/src/tools
rm -f "$CACHE/.ssl_renegotiate-built"
(
    cd "$src/pg_bsd_indent"
    # its C files, as its Makefile lists them
    cc -O2 -w -I"$includedir" -o "$CACHE/pg_bsd_indent.tmp" \
        args.c err.c indent.c io.c lexi.c parse.c pr_comment.c \
        -L"$libdir" -lpgcommon -lpgport
) || die "the build of pg_bsd_indent from ${tarball##*/} failed"
mv -f "$CACHE/pg_bsd_indent.tmp" "$CACHE/pg_bsd_indent"
install -m 755 "$src/pgindent/pgindent" "$CACHE/pgindent"
install -m 644 "$src/pgindent/typedefs.list" "$CACHE/typedefs.list"
"$CACHE/pg_bsd_indent" --version >/dev/null 2>&1 || die "the pg_bsd_indent built does not run"
echo "$key" >"$CACHE/.ssl_renegotiate-built"
log "pgindent and pg_bsd_indent of ${tarball##*/} in $CACHE"
echo "$CACHE"
