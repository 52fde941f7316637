#!/usr/bin/env bash
# fresh_check.sh -- the README's two commands on a really fresh Debian 12
# machine: a minimal root made by debootstrap, where nothing this machine
# has installed, built or cached can help.  Run as root.
#
#   scripts/fresh_check.sh [--keep] [--cached] [--plain-apt]
#                          [--only demo|test | --run COMMAND]
#
#   1. debootstrap --variant=minbase bookworm ROOT, from the Debian archive
#      this machine's own apt sources name (scripts/apt_sources.sh); ROOT
#      gets those Debian entries and this machine's apt.conf.d (proxy,
#      mirror settings), /etc/hosts and /etc/resolv.conf, and a policy-rc.d
#      that keeps package installs from starting services: the root shares
#      this machine's network, and its servers' ports.  With --plain-apt,
#      none of this machine's apt configuration: ROOT's apt has only what
#      debootstrap gave it and the archive's address, so apt's own checks
#      apply as on a plain Debian (a machine's apt.conf.d may switch off
#      Acquire::Check-Valid-Until, and hide a suite whose Release file has
#      expired).
#   2. bind-mounts /proc, /sys and /dev into ROOT, and a tmpfs on /dev/shm;
#   3. copies in a clone of HEAD (committed work only, as CI clones it) at
#      ROOT/work/main and ../shared (the PostgreSQL tarballs) at
#      ROOT/work/shared;
#   4. runs, inside, with CI=true: ./scripts/demo.sh, then
#      ./scripts/test.sh (with --cached: test.sh once more, on the builds
#      the first run left); with --run, COMMAND instead (a shell command
#      run in the clone, e.g. 'SSLR_CELLS=18 ./scripts/test.sh': one cell
#      as the first command of a fresh machine), its last line reported;
#   5. prints each command's result line, exit status and time, and
#      test.sh's lines of the first run: each cell's result and times; the logs stay in $SSLR_FRESH_LOGS (default
#      /var/tmp/ssl_renegotiate-fresh-logs);
#   6. unmounts, and removes ROOT unless --keep.
#
# Nothing of this machine's own is changed: ROOT is a new directory under
# $SSLR_FRESH_DIR (default /var/tmp), removed with --one-file-system after
# every mount under it is gone.  Exit status non-zero if a command failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
. "$HERE/common.sh"
. "$HERE/packages.sh"
. "$HERE/apt_sources.sh"

keep=
cached=
only=
plain_apt=
run=
usage="usage: $0 [--keep] [--cached] [--plain-apt] [--only demo|test | --run COMMAND]"
while [ $# -gt 0 ]; do
    case "$1" in
        --keep) keep=1 ;;
        --cached) cached=1 ;;
        --plain-apt) plain_apt=1 ;;
        --only) only=${2:-}; shift ;;
        --run) run=${2:-}; [ -n "$run" ] || { echo "$usage" >&2; exit 2; }; shift ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
case "$only" in "" | demo | test) ;; *) echo "$0: --only demo or --only test" >&2; exit 2 ;; esac
[ -z "$run" ] || [ -z "$only$cached" ] || { echo "$0: --run goes with neither --only nor --cached" >&2; exit 2; }
sslr_require_root fresh_check.sh

LOGS=${SSLR_FRESH_LOGS:-/var/tmp/ssl_renegotiate-fresh-logs}
PARENT=${SSLR_FRESH_DIR:-/var/tmp}
mkdir -p "$LOGS" "$PARENT"
ROOT=$(mktemp -d "$PARENT/ssl_renegotiate-fresh.XXXXXX")
chmod 755 "$ROOT"    # it is /, for user postgres too (mktemp made it 700)
log() { printf '==> fresh_check: %s\n' "$*" >&2; }

# ------------------------------------------------------------ clean-up
# Processes still running inside ROOT (a server a test left) are ours: end
# them, then unmount from the deepest mount up.  ROOT is only removed when
# nothing is mounted under it any more.
mounted_under_root() { findmnt -rn -o TARGET | awk -v r="$ROOT/" 'index($0 "/", r) == 1' | sort -r; }
cleanup() {
    local rc=$? p m
    trap - EXIT
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && kill -9 "${p#/proc/}" 2>/dev/null || true
    done
    sleep 1
    while read -r m; do
        [ -n "$m" ] && { umount "$m" 2>/dev/null || umount -l "$m" || true; }
    done < <(mounted_under_root)
    if [ -n "$(mounted_under_root)" ]; then
        log "still mounted under $ROOT, so it is kept: $(mounted_under_root | tr '\n' ' ')"
    elif [ -n "$keep" ]; then
        log "kept: $ROOT (remove it with: rm -rf --one-file-system $ROOT)"
    else
        rm -rf --one-file-system "$ROOT"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------- the root
sslr_install_packages debootstrap debian-archive-keyring git
sslr_debian_uris
start=$SECONDS
log "debootstrap --variant=minbase bookworm $ROOT $SSLR_ARCHIVE_URI"
debootstrap --variant=minbase bookworm "$ROOT" "$SSLR_ARCHIVE_URI" >"$LOGS/debootstrap.log" 2>&1 ||
    { tail -n 20 "$LOGS/debootstrap.log" >&2; exit 1; }
debootstrap_time=$((SECONDS - start))

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
    printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: %s\n' \
        "$SSLR_ARCHIVE_URI" "$keyring"
    [ -z "$SSLR_SECURITY_URI" ] ||
        printf '\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\nSigned-By: %s\n' \
            "$SSLR_SECURITY_URI" "$keyring"
} >"$ROOT/etc/apt/sources.list.d/debian.sources"
rm -f "$ROOT/etc/apt/sources.list"
if [ -n "$plain_apt" ]; then
    # shellcheck disable=SC2012 # the names, for the log only
    log "--plain-apt: none of this machine's apt configuration in the root ($(ls "$ROOT/etc/apt/apt.conf.d" | tr '\n' ' '))"
else
    cp -a /etc/apt/apt.conf.d/. "$ROOT/etc/apt/apt.conf.d/"
fi
cp /etc/hosts /etc/resolv.conf "$ROOT/etc/" 2>/dev/null || true
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"

mount -t proc proc "$ROOT/proc"
mount -t sysfs sysfs "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
mount --make-rslave "$ROOT/dev"
mount -t tmpfs -o mode=1777 shm "$ROOT/dev/shm"

mkdir -p "$ROOT/work"
git -c safe.directory='*' clone -q --no-hardlinks "$REPO" "$ROOT/work/main"
log "a clone of $(git -c safe.directory='*' -C "$ROOT/work/main" rev-parse --short HEAD) at $ROOT/work/main"
if [ -d "$REPO/../shared" ]; then
    cp -a "$REPO/../shared" "$ROOT/work/shared"
fi

# ------------------------------------------------------- the commands
# run_inside NAME COMMAND: in ROOT, from the clone, with a bare
# environment; output in $LOGS/NAME.log; sets took and status.
run_inside() {
    local name=$1 cmd=$2 begin=$SECONDS
    log "running $cmd inside (log: $LOGS/$name.log)"
    set +e
    chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb CI=true \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        bash -c "cd /work/main && $cmd" >"$LOGS/$name.log" 2>&1 &
    # waiting (not a foreground child) lets an INT or TERM reach the
    # clean-up at once, which ends what runs inside
    wait $!
    status=$?
    set -e
    took=$((SECONDS - begin))
}
minutes() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }
results=()
failed=0
report() { # report NAME COMMAND RESULT_LINE
    results+=("$2: exit status $status, $(minutes "$took"): $3")
    [ "$status" -eq 0 ] || failed=1
}
if [ -n "$run" ]; then
    run_inside run "$run"
    report run "$run" "$(tail -n 1 "$LOGS/run.log")"
    fresh_cells=$(grep -E '^(PostgreSQL .*|Debian package): .*passed, [0-9]+ failed$|^time: ' "$LOGS/run.log" || true)
elif [ "$only" != test ]; then
    run_inside demo ./scripts/demo.sh
    report demo ./scripts/demo.sh "$(grep -E 'COPY|MB/s' "$LOGS/demo.log" | tail -n 1 | sed 's/^ *//')"
fi
if [ -z "$run" ] && [ "$only" != demo ]; then
    run_inside test ./scripts/test.sh
    report test ./scripts/test.sh "$(tail -n 1 "$LOGS/test.log")"
    fresh_cells=$(grep -E '^(PostgreSQL .*|Debian package): .*passed, [0-9]+ failed$|^time: ' "$LOGS/test.log" || true)
    if [ -n "$cached" ]; then
        run_inside test-cached ./scripts/test.sh
        report test-cached "./scripts/test.sh (again, builds cached)" "$(tail -n 1 "$LOGS/test-cached.log")"
    fi
fi

echo
echo "fresh Debian 12 root (debootstrap --variant=minbase: $(minutes "$debootstrap_time")${plain_apt:+, its own apt configuration only}) at $ROOT"
printf '%s\n' "${results[@]}"
if [ -n "${fresh_cells:-}" ]; then
    echo "${run:-the first ./scripts/test.sh}, cell by cell:"
    printf '  %s\n' "$fresh_cells"
fi
exit "$failed"
