#!/usr/bin/env bash
# pg_build.sh -- a PostgreSQL of another major than Debian 12's, built once
# into a cache, for the tests.
#
#   scripts/pg_build.sh MAJOR [OPENSSL_SERIES]     (as root)
#
# Prints the installation prefix as its last line (PREFIX/bin/pg_config),
# and fails with the reason if the major cannot be had (for a build that
# fails: the compiler's first errors).  The sources, first that applies:
#
#   1. SSLR_PG_SOURCE: a PostgreSQL source tree (a git checkout or an
#      unpacked tarball) whose configure.ac is of MAJOR -- a development
#      branch.  Built out of tree (the tree is only read), into
#      $SSLR_PG_CACHE/MAJOR-tree; rebuilt when its path or commit differs
#      from the last build's, or a file in it is newer than that build.
#   2. A tarball postgresql-MAJOR<version>.tar.* (the newest) from the
#      directory SSLR_PG_SOURCES, default ../shared/pg-src beside the
#      checkout where it exists, pinned by its checksum: the one that
#      directory's SHA256SUMS lists for it (or FILE.sha256 beside it, as
#      postgresql.org serves them).  A tarball that no checksum names, or
#      that does not match, is refused -- the build fails saying so, and no
#      other source stands in for it.
#   3. Only where that directory has no tarball of MAJOR (15 against
#      another OpenSSL; a machine without ../shared): Debian's source
#      package postgresql-MAJOR, newest version first, from the suites
#      that carry it (15: bookworm; 17: trixie; others: forky, sid,
#      experimental), each read on its own (scripts/debsrc.sh: a private
#      apt configuration per suite on the system's own archive URIs; the
#      system's apt sources are never touched): a version that moves, and
#      suites whose Release files a mirror may serve expired.
#
# The build: --with-openssl and TAP support, nothing else optional, and of
# contrib the modules the tests use (sslinfo, postgres_fdw, dblink); the
# packages it needs (compiler, bison, flex, perl, OpenSSL's headers,
# IPC::Run) are installed first, whatever the source (git trees and release
# tarballs since 18 ship no generated parser).  It installs into
# $SSLR_PG_CACHE/MAJOR with a marker that names the source; a later run
# reuses it only if it is of the source that run would build (the same
# tarball by name and checksum, the same tree; any version of Debian's
# source package where that is the source): a build of another source is
# replaced (a cached 18.6 from Debian never passes for the tarball of
# 18.4).  .ssl_renegotiate-origin beside it says in a few words what
# was built (tarball; Debian source 18.6-3; git tree 1a2b3c4d5e6f
# (master)), for test.sh's lines.  With OPENSSL_SERIES (1.1.1, 3.5, ...): against that OpenSSL,
# built first by scripts/openssl_build.sh, into
# $SSLR_PG_CACHE/MAJOR-openssl-SERIES; otherwise against the system's.
#
# Environment: SSLR_PG_CACHE (default /var/cache/ssl_renegotiate/pg),
# SSLR_PG_JOBS (default: the number of CPUs), SSLR_PG_SOURCE,
# SSLR_PG_SOURCES.
set -euo pipefail

MAJOR=${1:-}
OPENSSL=${2:-}
[[ "$MAJOR" =~ ^[0-9]+$ ]] || { echo "usage: $0 MAJOR [OPENSSL_SERIES]" >&2; exit 2; }
[ -z "$OPENSSL" ] || [[ "$OPENSSL" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]] ||
    { echo "usage: $0 MAJOR [OPENSSL_SERIES]" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "pg_build.sh: run as root" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SSLR_PG_CACHE:-/var/cache/ssl_renegotiate/pg}
JOBS=${SSLR_PG_JOBS:-$(nproc)}
# the contrib modules the tests use
CONTRIB="sslinfo postgres_fdw dblink"
SOURCES=${SSLR_PG_SOURCES:-}
[ -n "$SOURCES" ] || [ ! -d "$HERE/../../shared/pg-src" ] || SOURCES=$(cd "$HERE/../../shared/pg-src" && pwd)

die() { printf 'pg_build.sh: PostgreSQL %s%s: %s\n' "$MAJOR" "${OPENSSL:+ with OpenSSL $OPENSSL}" "$*" >&2; exit 1; }

. "$HERE/debsrc.sh"
. "$HERE/pg_sources.sh"

# ------------------------------------------------ a tree of the user's
tree_id=
if [ -n "${SSLR_PG_SOURCE:-}" ]; then
    tree_major=$(sslr_tree_major "$SSLR_PG_SOURCE") || die "SSLR_PG_SOURCE: $tree_major"
    if [ "$tree_major" = "$MAJOR" ]; then
        tree_id=$(sslr_tree_identity "$SSLR_PG_SOURCE")
    else
        printf '==> SSLR_PG_SOURCE is a tree of %s, not %s: not used for %s\n' \
            "$tree_major" "$MAJOR" "$MAJOR" >&2
    fi
fi

NAME=$MAJOR${tree_id:+-tree}${OPENSSL:+-openssl-$OPENSSL}
PREFIX=$CACHE/$NAME
MARKER=$PREFIX/.ssl_renegotiate-built
log() { printf '==> pg_build %s: %s\n' "$NAME" "$*" >&2; }

# One build of a prefix at a time (test.sh builds ahead in the background):
# a second caller waits, then finds it cached.  The marker is written last:
# a prefix without it is never taken for a build.
mkdir -p "$CACHE"
exec 9>"$CACHE/.$NAME.lock"
flock -n 9 || { log "waiting for the build under way"; flock 9; }

# What this run builds, and so which cached build it may reuse: the tree;
# else the tarball, if the directory has one of MAJOR (checked now: one
# refused stops the build); else Debian's source package.
tarball=
key=
if [ -n "$tree_id" ]; then
    key=$tree_id
elif [ -n "$SOURCES" ]; then
    rc=0
    tarball_found=$(sslr_pg_tarball "$SOURCES" "$MAJOR") || rc=$?
    case "$rc" in
        0) tarball=${tarball_found#* }
           key="tarball ${tarball##*/} sha256 ${tarball_found%% *}" ;;
        2) log "no tarball postgresql-$MAJOR*.tar.* in $SOURCES: Debian's source package, where one downloads" ;;
        *) die "$tarball_found" ;;
    esac
fi
# cached_matches: the marker's build is of the source this run would build.
# Line 1 names the source for people, line 2 is its key (a tarball's name
# and checksum, a tree's identity); a tarball build of an earlier version
# of this script has no line 2, and is known by its name.
cached_matches() {
    local first second
    [ -f "$MARKER" ] && [ -x "$PREFIX/bin/pg_config" ] || return 1
    first=$(sed -n 1p "$MARKER")
    second=$(sed -n 2p "$MARKER")
    if [ -n "$tree_id" ]; then
        [ "$second" = "$tree_id" ] && ! sslr_tree_changed_since "$SSLR_PG_SOURCE" "$MARKER"
    elif [ -n "$tarball" ]; then
        [ "$second" = "$key" ] ||
            { [ -z "$second" ] && [[ "$first" == "tarball ${tarball##*/}" || "$first" == "tarball ${tarball##*/} against "* ]]; }
    else
        [[ "$first" == "Debian source "* ]]
    fi
}
if cached_matches; then
    printf '==> cached: %s\n' "$(head -n 1 "$MARKER")" >&2
    echo "$PREFIX"
    exit 0
fi
if [ -f "$MARKER" ]; then
    held=$(sed -n 2p "$MARKER")
    log "$PREFIX holds a build of ${held:-$(sed -n 1p "$MARKER")}, not of ${key:-a Debian source package}: it is rebuilt"
fi

# ------------------------------------------------------------ build tools
# What this configuration needs (packages.sh says why each)
. "$HERE/packages.sh"
# shellcheck disable=SC2086 # a list of words
sslr_install_packages $SSLR_PG_BUILD_PACKAGES

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

# ------------------------------------------------------------- sources
work=$CACHE/src/$NAME
rm -rf "$work"
mkdir -p "$work"
if [ -n "$tree_id" ]; then
    srcdir=$(cd "$SSLR_PG_SOURCE" && pwd)
    origin=$tree_id
    short=${tree_id%% /*}         # "git tree" or "source tree"
    [[ "$tree_id" != *" at "* ]] || short+=" ${tree_id#* at }"
elif [ -n "$tarball" ]; then
    srcdir=$(sslr_unpack_tarball "$tarball" "$work") || die "cannot unpack $tarball"
    origin="tarball ${tarball##*/}"
    short=tarball
else
    # only the suites that carry the major; bookworm and bookworm-security:
    # Debian 12's own 15, for builds against another OpenSSL
    case "$MAJOR" in
        15) suites="bookworm bookworm-security" ;;
        17) suites="trixie trixie-security" ;;
        *) suites="forky sid experimental" ;;
    esac
    err=$work/debian-source.err
    # shellcheck disable=SC2086 # a list of suites
    chosen=$(sslr_debian_source "$CACHE/apt" "$work/debian" "postgresql-$MAJOR" . $suites 2>"$err") || {
        cat "$err" >&2
        die "no tarball of $MAJOR${SOURCES:+ in $SOURCES}, and Debian's source package: $(tail -n 1 "$err")"
    }
    cat "$err" >&2
    srcdir=$(sslr_unpack_upstream "$work/debian" "postgresql-$MAJOR") ||
        die "cannot unpack the source package of $chosen"
    origin="Debian source $chosen"
    short=$origin
    key="Debian source postgresql-$MAJOR $chosen"
fi
log "building $origin$ssl_built"

# ---------------------------------------------------------------- build
# A complete prefix is replaced only for a tree that changed: the runs
# testing on it hold its use lock, shared (scripts/test.sh), and it is
# removed once they are done, never under them.
if [ -e "$PREFIX" ]; then
    exec 8>>"$CACHE/.$NAME.use"
    flock -n -x 8 || { log "waiting for the runs that use $PREFIX"; flock -x 8; }
fi
# Out of the source tree (VPATH): a tree of the user's is only read.
rm -rf "$PREFIX"
build=$work/build
mkdir -p "$build"
(
    cd "$build"
    "$srcdir/configure" --prefix="$PREFIX" --with-openssl --enable-tap-tests \
        --without-icu --without-readline --without-zlib --without-llvm \
        "${ssl_flags[@]}" \
        >"$work/configure.log" 2>&1 ||
        { tail -n 30 "$work/configure.log" >&2; exit 1; }
    # the server and its programs, then only the contrib modules the tests
    # load (all of contrib would be a fifth of the build); on failure: the
    # compiler's errors first (the reason), then the tail
    {
        make -s -j"$JOBS" &&
            for m in $CONTRIB; do make -s -j"$JOBS" -C "contrib/$m" || exit 1; done
    } >"$work/build.log" 2>&1 ||
        { grep -E -m 5 'error:|Error [0-9]' "$work/build.log" >&2; tail -n 40 "$work/build.log" >&2; exit 1; }
    {
        make -s install &&
            for m in $CONTRIB; do make -s -C "contrib/$m" install || exit 1; done
    } >>"$work/build.log" 2>&1 ||
        { tail -n 40 "$work/build.log" >&2; exit 1; }
) || {
    # the reason in one line: configure's error or the compiler's first
    reason=$(grep -h -E -m 1 '^configure: error:| error: ' "$work/configure.log" "$work/build.log" \
        2>/dev/null | head -n 1 || true)
    die "the build of $origin$ssl_built failed${reason:+: $reason} (logs in $work)"
}
[ -x "$PREFIX/bin/pg_config" ] || die "the build of $origin installed no pg_config"
# line 1 names the source (test.sh puts it on the cell's line); line 2 its
# key, to tell a later run whether this build is of its source
{
    echo "$origin$ssl_built"
    echo "$key"
} >"$MARKER"
echo "$short${OPENSSL:+, OpenSSL $OPENSSL}" >"$PREFIX/.ssl_renegotiate-origin"
rm -rf "$build" "$work"/debian/*/ "$work"/postgresql-*/
log "installed into $PREFIX"
echo "$PREFIX"
