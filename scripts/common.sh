# shellcheck shell=bash
# common.sh -- what the root-run scripts share (test.sh, demo.sh,
# sanitize.sh, bench/*.sh).  Each of them starts as root, runs setup.sh
# (packages, build, install), then hands over to user postgres, because
# initdb and pg_ctl refuse root.  Source it; it defines functions only.

# The PostgreSQL to use: Debian's 15, unless SSLR_PG_CONFIG names the
# pg_config of another installation (scripts/pg_build.sh makes them).
SSLR_PG_CONFIG=${SSLR_PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PG_BINDIR=$(dirname "$SSLR_PG_CONFIG")
SSLR_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Stop unless running as root.
sslr_require_root() {
    local script=$1
    [ "$(id -u)" -eq 0 ] ||
        { echo "$script: run as root (it installs packages and the extension)" >&2; exit 1; }
}

# As root: use PostgreSQL major $1 (default 15, Debian's): for another,
# build it once (scripts/pg_build.sh) and point SSLR_PG_CONFIG and
# PG_BINDIR at it.
sslr_select_major() {
    local major=${1:-15} prefix
    [ "$major" = 15 ] && return 0
    prefix=$(bash "$SSLR_REPO/scripts/pg_build.sh" "$major" | tail -n 1) && [ -n "$prefix" ] ||
        { echo "PostgreSQL $major could not be built" >&2; exit 1; }
    SSLR_PG_CONFIG=$prefix/bin/pg_config
    PG_BINDIR=$prefix/bin
    export SSLR_PG_CONFIG
}

# Run scripts/setup.sh and print the postgres-owned work directory it
# built and installed from: $1 if given, else $SSLR_WORKDIR if set, else
# a new one of its own (mktemp).  SSLR_NEEDS says which packages beyond the
# build's (scripts/packages.sh).
# shellcheck disable=SC2120 # the work directory ($1) is optional
sslr_setup() {
    local out workdir
    out=$(SSLR_WORKDIR="${1:-${SSLR_WORKDIR:-}}" SSLR_PG_CONFIG="$SSLR_PG_CONFIG" \
        SSLR_NEEDS="${SSLR_NEEDS:-}" bash "$SSLR_REPO/scripts/setup.sh") ||
        { echo "setup.sh failed" >&2; return 1; }
    workdir=$(printf '%s\n' "$out" | tail -n 1)
    [ -d "$workdir" ] || { echo "setup.sh gave no work directory ('$workdir')" >&2; return 1; }
    printf '%s\n' "$workdir"
}

# Run a command as postgres in directory $1, with PostgreSQL 15's binaries
# first in PATH and none of root's libpq settings (a PGHOST or PGSSLMODE
# there must not point the scripts' clients at another server).  Arguments
# after the directory are env(1)'s: VAR=value pairs, then the command.
sslr_as_postgres() {
    local dir=$1
    shift
    runuser -u postgres -- env -C "$dir" \
        -u PGHOST -u PGHOSTADDR -u PGPORT -u PGDATABASE -u PGUSER -u PGSERVICE \
        -u PGSSLMODE -u PGOPTIONS -u PGDATA -u PGPASSWORD -u PGSSLMINPROTOCOLVERSION \
        -u PGSSLMAXPROTOCOLVERSION -u PGGSSENCMODE -u PGAPPNAME \
        PATH="$PG_BINDIR:$PATH" "$@"
}

# As root: install (scripts/setup.sh), then run the calling script again as
# postgres from the postgres-owned work dir, with INNER_VAR set and the
# given VAR=value pairs in its environment; then remove that work dir,
# unless it is $SSLR_WORKDIR (the caller's).  Exits with the script's
# status; does not return.
sslr_rerun_as_postgres() {
    local script_in_tree=$1 inner_var=$2 rc=0
    shift 2
    sslr_require_root "$script_in_tree"
    # shellcheck disable=SC2119 # the default work directory
    SSLR_RERUN_WORKDIR=$(sslr_setup)
    [ -n "${SSLR_WORKDIR:-}" ] || trap 'rm -rf "$SSLR_RERUN_WORKDIR"' EXIT
    sslr_as_postgres /tmp "$inner_var=1" WORKDIR="$SSLR_RERUN_WORKDIR" SSLR_PG_CONFIG="$SSLR_PG_CONFIG" "$@" \
        bash "$SSLR_RERUN_WORKDIR/$script_in_tree" || rc=$?
    exit "$rc"
}

# An empty directory $1 that postgres may write results into.
sslr_results_dir() {
    rm -rf "$1"
    mkdir -p "$1"
    chown postgres:postgres "$1"
}

# Copy the results in $1 (if any) to the checkout's bench/results/.
sslr_collect_results() {
    local out=$1
    compgen -G "$out/*" >/dev/null || return 0
    mkdir -p "$SSLR_REPO/bench/results"
    cp "$out"/* "$SSLR_REPO/bench/results/"
    echo "=== results copied to $SSLR_REPO/bench/results/: $(cd "$out" && echo *) ===" >&2
}

# What was measured: the checkout's commit, "-dirty" if it had changes.
sslr_revision() {
    git -c safe.directory='*' -C "$SSLR_REPO" describe --always --dirty 2>/dev/null || echo unknown
}

# sslr_check WHAT COMMAND...: run it, print "KIND check ok: WHAT" or "KIND
# check FAILED: WHAT" (KIND: $SSLR_CHECK_KIND) and count a failure in
# $failures; scripts/test.sh counts those lines.  The side tests (package,
# machine, Patroni) call it as their check.
sslr_check() {
    local what=$1
    shift
    if "$@"; then
        echo "$SSLR_CHECK_KIND check ok: $what"
    else
        echo "$SSLR_CHECK_KIND check FAILED: $what"
        failures=$((failures + 1))
    fi
}
