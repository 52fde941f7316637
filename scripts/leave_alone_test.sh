#!/usr/bin/env bash
# leave_alone_test.sh -- scripts/demo.sh leaves the machine's own servers
# and services as it found them.  Run as root; scripts/test.sh runs it in
# the cell 15, at the same time as that cell's suite (two runs at once,
# each in its own directories, both passing).
#
#   1. Debian's cluster 15/main runs: started with pg_ctlcluster if it is
#      down and has never run, created with pg_createcluster if there is
#      none (a down cluster that has run, or a down exporter whose file
#      names a server, is the machine's: the machine's checks are skipped,
#      and the demo still runs beside the suite); the service
#      prometheus-postgres-exporter runs (systemctl where systemd runs, else
#      its init script): started if it is not, with, if its
#      /etc/default/prometheus-postgres-exporter names no server (Debian's
#      default), one naming 15/main's socket for the time of the test;
#   2. their postmaster and exporter process ids, a checksum of every file
#      under /etc/postgresql/15/main, of /etc/default/prometheus-postgres-
#      exporter, of /usr/sbin/policy-rc.d (or its absence) and the lists of
#      rc.d links and systemd wants (nothing disabled) are noted;
#   3. scripts/demo.sh runs (SSLR_DEMO_ROWS small), as the README's block
#      "main-job" (scripts/doc_examples.pl run), and must pass;
#   4. the same processes run, the same checksums and lists hold, and the
#      demo's work directory is gone;
#   5. what step 1 started is stopped, what it created removed and the
#      file it set restored, however the test ends: the machine is left as
#      it was before the test.
# Each check prints "machine check ok: WHAT" or "machine check FAILED:
# WHAT" (test.sh counts them); the exit status is non-zero if one failed.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
. "$SSLR_REPO/scripts/packages.sh"

sslr_require_root leave_alone_test.sh

EXPORTER=prometheus-postgres-exporter
EXPORTER_CONF=/etc/default/$EXPORTER
CLUSTER_CONF=/etc/postgresql/15/main
PIDFILE=/var/lib/postgresql/15/main/postmaster.pid

failures=0
SSLR_CHECK_KIND=machine
check() { sslr_check "$@"; }

# quiet: the packages are there when test.sh runs this (its setup)
sslr_install_packages postgresql-15 "$EXPORTER" daemon 2>/dev/null

systemd() { [ -d /run/systemd/system ]; }
exporter_running() {
    if systemd; then
        systemctl is-active --quiet "$EXPORTER"
    else
        "/etc/init.d/$EXPORTER" status >/dev/null 2>&1
    fi
}
exporter_pid() {
    if systemd; then
        systemctl show -p MainPID --value "$EXPORTER"
    else
        # the init script's daemon(1) and the exporter it runs
        local d
        d=$(cat "/run/prometheus/$EXPORTER.pid" 2>/dev/null) && [ -n "$d" ] &&
            echo "$d" "$(pgrep -d ' ' -P "$d")"
    fi
}
cluster_status() { pg_lsclusters -h 2>/dev/null | awk '$1 == 15 && $2 == "main" { print $4 }'; }

# --------------------------------------------------- 1. running servers
created_cluster='' started_cluster='' started_exporter=''
saved=$(mktemp -d /tmp/ssl_renegotiate-leave-alone.XXXXXX)
restore() {
    local rc=$?
    trap - EXIT
    if [ -n "$started_exporter" ]; then
        if systemd; then systemctl stop "$EXPORTER"; else "/etc/init.d/$EXPORTER" stop >/dev/null; fi || true
    fi
    [ ! -e "$saved/exporter.conf" ] || cp -p "$saved/exporter.conf" "$EXPORTER_CONF"
    rm -rf "$saved"
    if [ -n "$created_cluster" ]; then
        pg_dropcluster --stop 15 main || true
    elif [ -n "$started_cluster" ]; then
        pg_ctlcluster 15 main stop -m fast || true
    fi
    exit "$rc"
}
trap restore EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# What the test may start: only what holds nothing of anyone's yet.  A
# cluster that has never run (the one Debian's package made under our
# policy-rc.d) or one it creates; an exporter whose file names no server
# (Debian's default).  A server of the machine's that is down stays down:
# the machine's checks are skipped, and it says so; the demo still runs
# beside the suite.
skipped=
skip() {
    echo "machine check skipped: $1"
    skipped=$1
}
case "$(cluster_status)" in
    online) echo "15/main runs already" ;;
    down) if [ -e /var/lib/postgresql/15/main/postmaster.opts ]; then
        skip "15/main is down and has run before: it is this machine's, and stays down"
    else
        echo "starting 15/main, which has never run (stopped again at the end)"
        started_cluster=1
        pg_ctlcluster 15 main start
    fi ;;
    *) echo "creating and starting 15/main (removed at the end)"
       created_cluster=1
       pg_createcluster --start 15 main >/dev/null ;;
esac
if [ -n "$skipped" ]; then
    :
elif exporter_running; then
    echo "the $EXPORTER service runs already"
elif ! grep -Eq "^DATA_SOURCE_NAME=(''|\"\")?$" "$EXPORTER_CONF"; then
    skip "the $EXPORTER service is down and configured: it is this machine's, and stays down"
else
    echo "starting the $EXPORTER service, with DATA_SOURCE_NAME set to 15/main's socket in"
    echo "$EXPORTER_CONF, which named no server (both undone at the end)"
    cp -p "$EXPORTER_CONF" "$saved/exporter.conf"
    sed -i "s|^DATA_SOURCE_NAME=.*|DATA_SOURCE_NAME='host=/run/postgresql dbname=postgres'|" "$EXPORTER_CONF"
    # the init script sources the file: the variable must be exported
    systemd || echo 'export DATA_SOURCE_NAME' >>"$EXPORTER_CONF"
    started_exporter=1
    if systemd; then systemctl start "$EXPORTER"; else "/etc/init.d/$EXPORTER" start >/dev/null; fi
    for _ in $(seq 50); do exporter_pid | grep -q '^[1-9]' && break; sleep 0.1; done
fi

# ------------------------------------------------------ 2. what they are
state() {
    echo "15/main $(cluster_status) postmaster $(head -n 1 "$PIDFILE" 2>/dev/null)"
    echo "$EXPORTER pid $(exporter_pid)"
    find "$CLUSTER_CONF" "$EXPORTER_CONF" -type f -print0 | sort -z | xargs -0 sha256sum
    if [ -e "$SSLR_POLICY_RC" ]; then sha256sum "$SSLR_POLICY_RC"; else echo "no $SSLR_POLICY_RC"; fi
    ls -l /etc/rc[0-6S].d/ /etc/systemd/system/*.wants/ 2>/dev/null || true
}
before=$(state)
if [ -z "$skipped" ]; then
    check "15/main runs before the demo" [ "$(cluster_status)" = online ]
    check "the $EXPORTER service runs before the demo" exporter_running
fi

# ----------------------------------------------------------- 3. the demo
# the README's own command, its block "main-job" (scripts/doc_examples.pl)
echo "=== scripts/demo.sh (SSLR_DEMO_ROWS=20000) ==="
demo_log=$(mktemp /tmp/ssl_renegotiate-leave-alone.XXXXXX)
demo() {
    env -u SSLR_NEEDS -u SSLR_WORKDIR SSLR_DEMO_ROWS=20000 perl "$SSLR_REPO/scripts/doc_examples.pl" run main-job \
        >"$demo_log" 2>&1 || { tail -n 40 "$demo_log"; return 1; }
    grep -E '^    TLS 1.3' "$demo_log"
}
check "scripts/demo.sh passes" demo
# setup.sh's "==> copying CHECKOUT to WORKDIR"
demo_workdir=$(sed -n 's/^==> copying .* to \(\/.*\)$/\1/p' "$demo_log" | head -n 1)
rm -f "$demo_log"

# ------------------------------------------------------- 4. as they were
after=$(state)
same_state() {
    [ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after"); return 1; }
}
same_processes() {
    local b a
    b=$(sed -n 1,2p <<<"$before") a=$(sed -n 1,2p <<<"$after")
    if [[ "$b" =~ ^15/main\ online\ postmaster\ [0-9]+$'\n'$EXPORTER\ pid\ [1-9][0-9]*( [0-9]+)*$ ]] &&
        [ "$b" = "$a" ]; then
        return 0
    fi
    printf 'before: %s\nafter:  %s\n' "$b" "$a"
    return 1
}
[ -n "$skipped" ] ||
    check "15/main and the $EXPORTER service still run, the same processes" same_processes
check "their files, policy-rc.d and the boot links are unchanged" same_state
gone() { [ -n "$1" ] && [ ! -e "$1" ]; }
check "the demo worked in a directory of its own (${demo_workdir:-none named}), and removed it" \
    gone "$demo_workdir"

[ "$failures" -eq 0 ]
