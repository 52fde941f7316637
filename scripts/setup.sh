#!/usr/bin/env bash
# setup.sh -- prepare this (Debian 12) machine for building and testing
# ssl_renegotiate, then build and install the extension.
#
# Run as root.  Idempotent, and quick when everything is already present:
#   1. installs the Debian packages that are missing, of those the caller
#      needs (SSLR_NEEDS: scripts/packages.sh; apt-get update runs only when
#      something is missing), with no service started by their installation
#      (a temporary policy-rc.d);
#   2. copies the checkout (tracked files plus untracked, non-ignored files;
#      never .git or build products) into a work directory owned by user
#      postgres: $SSLR_WORKDIR if set (created, or emptied if an earlier run
#      of this script made it), else a new one, mktemp -d
#      /tmp/ssl_renegotiate-build.XXXXXX -- two runs never share one;
#   3. builds it there as postgres, warning-free (-Wall -Wextra -Werror)
#      and with -g (test/t/047 stops a backend in gdb at a line of slots.c),
#      and installs it as root, for Debian's PostgreSQL 15 or the one whose
#      pg_config SSLR_PG_CONFIG names: make install into a staging
#      directory, then each file that differs renamed into place (a server
#      starting meanwhile reads the old file or the new, never half of one),
#      one run at a time.
# It stops, disables or reconfigures nothing: clusters and services running
# on the machine (Debian's 15/main, an exporter, pgbouncer) are left as they
# are; every script and test runs its own servers on free ports, on
# 127.0.0.1 and private Unix socket directories.
# The last line printed is the work directory.
set -euo pipefail

# Debian's PostgreSQL 15 unless SSLR_PG_CONFIG names another pg_config
# (scripts/pg_build.sh builds other majors).
PG_CONFIG=${SSLR_PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PG_BINDIR=$(dirname "$PG_CONFIG")
MARKER=.ssl_renegotiate-workdir

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'setup.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must be run as root"

# ---------------------------------------------------------------- packages
. "$REPO/scripts/packages.sh"
# shellcheck disable=SC2086 # lists of words
packages=$(sslr_packages_for ${SSLR_NEEDS:-}) || die "SSLR_NEEDS: '${SSLR_NEEDS:-}'"
# shellcheck disable=SC2086
sslr_install_packages $packages
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found after package installation"

# ------------------------------------------------- copy tree to workdir
if [ -z "${SSLR_WORKDIR:-}" ]; then
    WORKDIR=$(mktemp -d /tmp/ssl_renegotiate-build.XXXXXX)
    chmod 755 "$WORKDIR"
else
    WORKDIR=$SSLR_WORKDIR
fi
case "$WORKDIR" in
    /*) ;;
    *) die "SSLR_WORKDIR must be an absolute path (got '$WORKDIR')" ;;
esac
[ "$WORKDIR" != / ] || die "refusing to use / as work directory"
case "$REPO/" in
    "$WORKDIR"/*) die "work directory $WORKDIR contains the checkout $REPO" ;;
esac
case "$WORKDIR/" in
    "$REPO"/*) die "work directory $WORKDIR is inside the checkout $REPO" ;;
esac
if [ -n "$(ls -A "$WORKDIR" 2>/dev/null)" ]; then
    # Only ever empty a directory this script filled.
    [ -f "$WORKDIR/$MARKER" ] ||
        die "$WORKDIR is not empty and was not made by setup.sh (no $MARKER); remove it or change SSLR_WORKDIR"
    find "$WORKDIR" -mindepth 1 -delete
fi
mkdir -p "$WORKDIR"

log "copying $REPO to $WORKDIR"
. "$REPO/scripts/copy_tree.sh"
sslr_copy_tree "$REPO" "$WORKDIR"
touch "$WORKDIR/$MARKER"
chown -R postgres:postgres "$WORKDIR"

# -------------------------------------------------------- build + install
if [ -f "$WORKDIR/Makefile" ]; then
    log "building as postgres in $WORKDIR"
    runuser -u postgres -- env -C "$WORKDIR" PATH="$PG_BINDIR:$PATH" \
        make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" COPT='-g -Wall -Wextra -Werror' >&2
    log "installing (make install) as root into $("$PG_CONFIG" --pkglibdir) and $("$PG_CONFIG" --sharedir)/extension"
    stage=$WORKDIR/.install-stage
    (cd "$WORKDIR" && make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" DESTDIR="$stage" install >&2)
    # One install at a time; a file already as built is left alone, another
    # is written beside its place and renamed over it, so a server loading
    # the library or CREATE EXTENSION reading a script never sees half a
    # file (two runs of one checkout install the same files).
    (
        mkdir -p "${SSLR_APT_LOCK%/*}"
        exec 8>/run/lock/ssl_renegotiate-install.lock
        flock 8
        cd "$stage"
        find . -type f -print0 | while IFS= read -r -d '' f; do
            target=/${f#./}
            cmp -s "$f" "$target" && continue
            mkdir -p "$(dirname "$target")"
            cp -p "$f" "$target.sslr-new.$$"
            mv -f "$target.sslr-new.$$" "$target"
        done
    )
    rm -rf "$stage"
    # make install as root may leave root-owned files behind in the tree
    chown -R postgres:postgres "$WORKDIR"
else
    log "WARNING: no Makefile in $REPO yet; nothing built or installed"
fi

echo "$WORKDIR"
