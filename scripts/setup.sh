#!/usr/bin/env bash
# setup.sh -- prepare this (Debian 12) machine for building and testing
# ssl_renegotiate, then build and install the extension.
#
# Run as root.  Idempotent, and quick when everything is already present:
#   1. installs the Debian packages in SSLR_PACKAGES that are missing
#      (apt-get update runs only when something is missing);
#   2. makes sure Debian's default "15/main" cluster is not running (we
#      never use it; every script and test runs its own server on its own
#      port, on 127.0.0.1 / a private Unix socket directory), and neither
#      are the services of pgbouncer, prometheus and
#      prometheus-postgres-exporter (t/050 and t/051 start their own);
#   3. copies the checkout (tracked files plus untracked, non-ignored files;
#      never .git or build products) into a work directory owned by user
#      postgres -- $SSLR_WORKDIR, default /tmp/ssl_renegotiate-build;
#   4. builds it there as postgres, warning-free (-Wall -Wextra -Werror),
#      and installs it as root, for Debian's PostgreSQL 15 or the one whose
#      pg_config SSLR_PG_CONFIG names.
# The last line printed is the work directory.
set -euo pipefail

# Packages we need.  Add to this list (one place) when something new is
# required, e.g. default-jre-headless libpostgresql-jdbc-java.
SSLR_PACKAGES="postgresql-15 postgresql-server-dev-15 libssl-dev libkrb5-dev
libipc-run-perl iproute2 make gcc openssl perl procps
default-jre-headless default-jdk-headless libpostgresql-jdbc-java
gnuplot-nox cppcheck clang-tidy valgrind
pgbouncer prometheus prometheus-postgres-exporter"

# Debian's PostgreSQL 15 unless SSLR_PG_CONFIG names another pg_config
# (scripts/pg_build.sh builds other majors).
PG_CONFIG=${SSLR_PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PG_BINDIR=$(dirname "$PG_CONFIG")
WORKDIR=${SSLR_WORKDIR:-/tmp/ssl_renegotiate-build}
MARKER=.ssl_renegotiate-workdir

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'setup.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must be run as root"

# ---------------------------------------------------------------- packages
. "$REPO/scripts/packages.sh"
# shellcheck disable=SC2086 # a list of words
sslr_install_packages $SSLR_PACKAGES
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found after package installation"

# --------------------------------------------- Debian's default cluster
# Installing postgresql-15 creates (and may start) cluster 15/main on port
# 5432.  We don't use it: stop it if it runs and keep it from auto-starting.
if command -v pg_lsclusters >/dev/null 2>&1; then
    while read -r ver name _port status _rest; do
        [ "$ver" = 15 ] && [ "$name" = main ] || continue
        if [ "$status" = online ]; then
            log "stopping Debian's default cluster 15/main (not used)"
            pg_ctlcluster 15 main stop -m fast || true
        fi
        startconf=/etc/postgresql/15/main/start.conf
        if [ -f "$startconf" ] && ! grep -qx manual "$startconf"; then
            # comments are kept; the first non-comment word decides
            sed -i 's/^[[:space:]]*auto[[:space:]]*$/manual/' "$startconf"
        fi
    done < <(pg_lsclusters -h 2>/dev/null || true)
fi

# ------------------------------------------ services started by packages
# pgbouncer, prometheus (for promtool) and prometheus-postgres-exporter come
# with services that their installation starts where it can (under systemd,
# or in a container without a policy-rc.d that forbids it), on ports 6432,
# 9090 and 9187.  The tests start their own on free loopback ports: stop the
# packaged ones, and keep them from starting at the next boot, under either
# init.
for svc in pgbouncer prometheus prometheus-postgres-exporter; do
    [ -x "/etc/init.d/$svc" ] || [ -e "/lib/systemd/system/$svc.service" ] || continue
    if [ -d /run/systemd/system ]; then
        for unit in "$svc.service" "$svc.socket"; do
            if systemctl is-enabled --quiet "$unit" 2>/dev/null ||
                systemctl is-active --quiet "$unit" 2>/dev/null; then
                log "stopping and disabling $unit (not used)"
                systemctl disable --now --quiet "$unit" >&2 || true
            fi
        done
        continue
    fi
    if [ -x "/etc/init.d/$svc" ] && "/etc/init.d/$svc" status >/dev/null 2>&1; then
        log "stopping the $svc service (not used)"
        "/etc/init.d/$svc" stop >&2 || true
    fi
    if compgen -G "/etc/rc[2-5].d/S[0-9][0-9]$svc" >/dev/null; then
        update-rc.d "$svc" disable >/dev/null 2>&1 || true
    fi
    if [ -e "/etc/systemd/system/multi-user.target.wants/$svc.service" ]; then
        deb-systemd-helper disable "$svc.service" >/dev/null 2>&1 || true
    fi
done

# ------------------------------------------------- copy tree to workdir
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
if [ -e "$WORKDIR" ]; then
    # Only ever delete a directory this script created.
    [ -f "$WORKDIR/$MARKER" ] ||
        die "$WORKDIR exists but was not made by setup.sh (no $MARKER); remove it or set SSLR_WORKDIR"
    rm -rf "$WORKDIR"
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
        make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" COPT='-Wall -Wextra -Werror' >&2
    log "installing (make install) as root"
    (cd "$WORKDIR" && make -s USE_PGXS=1 PG_CONFIG="$PG_CONFIG" install >&2)
    # make install as root may leave root-owned files behind in the tree
    chown -R postgres:postgres "$WORKDIR"
else
    log "WARNING: no Makefile in $REPO yet; nothing built or installed"
fi

echo "$WORKDIR"
