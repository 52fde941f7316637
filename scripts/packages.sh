# shellcheck shell=bash
# packages.sh -- the Debian packages each command needs, and their
# installation (as root) without starting any service.  Sourced by setup.sh,
# package_test.sh, pg_build.sh, openssl_build.sh, fresh_check.sh; defines
# variables and functions only.

# What scripts/setup.sh installs, by what the caller needs (SSLR_NEEDS, a
# list of the words below; the build's packages always):
#   (always)  building the extension against Debian's PostgreSQL 15 and
#             running the demo: the server, its headers, a compiler (gcc
#             and libc6-dev, which gcc only recommends), the
#             openssl program (certificates), ss (free ports);
#   test      scripts/test.sh: TAP (IPC::Run), make lint (cppcheck,
#             clang-tidy, shellcheck, perltidy), test/t/021's Java client (JDK, pgjdbc), test/t/025's
#             GnuTLS and rustls clients (GnuTLS headers, cargo, rustc,
#             Debian's Rust crates), test/t/050's
#             exporter and promtool, test/t/051's pgbouncer; daemon, which the
#             exporter's init script runs it with where systemd does not
#             run (scripts/leave_alone_test.sh starts that service);
#             scripts/patroni_test.sh's cluster: Patroni, etcd and the
#             Python modules of Patroni and of the test's writer
#             (SSLR_PATRONI_PACKAGES);
#   valgrind  scripts/memcheck.sh, bench/instructions.sh;
#   (scripts/citus_build.sh installs its own: SSLR_CITUS_PACKAGES)
#   bench     bench/*.sh: the test packages, gnuplot, valgrind.
SSLR_BUILD_PACKAGES="postgresql-15 postgresql-server-dev-15 libssl-dev libkrb5-dev
make gcc libc6-dev openssl perl procps iproute2"
# Debian 12's patroni 3.0.2 (its DCS client python3-etcd comes with it)
# and etcd-server 3.4; python3-psycopg2 and python3-yaml are Patroni's, and
# the test's writer and query reader use them too
SSLR_PATRONI_PACKAGES="patroni etcd-server python3-psycopg2 python3-yaml"
# test/t/025's clients (test/t/clients/build.sh): a C client over GnuTLS, and a Rust
# one on tokio-postgres over rustls, built offline from Debian's packaged
# crates with Debian's cargo and rustc (Debian 12 packages no
# tokio-postgres-rustls adapter: the client has its own)
SSLR_GNUTLS_CLIENT_PACKAGES="libgnutls28-dev pkg-config gcc"
SSLR_RUSTLS_CLIENT_PACKAGES="cargo rustc librust-tokio-postgres-dev
librust-tokio-rustls-dev librust-rustls-dev librust-rustls-pemfile-dev
librust-tokio-dev librust-futures-util-dev librust-md-5-dev librust-bytes-dev"
SSLR_TEST_PACKAGES="libipc-run-perl cppcheck clang-tidy shellcheck perltidy
default-jre-headless default-jdk-headless libpostgresql-jdbc-java
pgbouncer prometheus prometheus-postgres-exporter daemon
$SSLR_PATRONI_PACKAGES
$SSLR_GNUTLS_CLIENT_PACKAGES $SSLR_RUSTLS_CLIENT_PACKAGES"
SSLR_VALGRIND_PACKAGES="valgrind"
# scripts/pg_build.sh: a PostgreSQL of this configuration (nothing of
# Debian's full Build-Depends: LLVM, ICU, ... are configured out); gcc
# alone cannot link (libc6-dev is only its Recommends); xz-utils and bzip2
# unpack tarballs
# shellcheck disable=SC2034 # for scripts/pg_build.sh and scripts/test.sh
SSLR_PG_BUILD_PACKAGES="gcc libc6-dev make perl bison flex libssl-dev libipc-run-perl
xz-utils bzip2 debian-archive-keyring"
# scripts/openssl_build.sh: another OpenSSL, from Debian's source package
# shellcheck disable=SC2034 # for scripts/openssl_build.sh and scripts/test.sh
SSLR_OPENSSL_BUILD_PACKAGES="gcc libc6-dev make perl dpkg-dev debian-archive-keyring"
# scripts/citus_build.sh: Citus's build (curl, lz4, zstd and krb5 headers)
# shellcheck disable=SC2034 # for scripts/citus_build.sh and scripts/test.sh
SSLR_CITUS_PACKAGES="gcc make libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev"
SSLR_BENCH_PACKAGES="$SSLR_TEST_PACKAGES gnuplot-nox valgrind"

# sslr_packages_for NEED...: the package list for those needs (words of
# SSLR_NEEDS); fails on an unknown word.
sslr_packages_for() {
    local need list=$SSLR_BUILD_PACKAGES
    for need in "$@"; do
        case "$need" in
            test) list+=" $SSLR_TEST_PACKAGES" ;;
            valgrind) list+=" $SSLR_VALGRIND_PACKAGES" ;;
            bench) list+=" $SSLR_BENCH_PACKAGES" ;;
            *) echo "packages.sh: unknown need '$need' (test, valgrind, bench)" >&2; return 1 ;;
        esac
    done
    # shellcheck disable=SC2086 # one line of words
    echo $list
}

# Debian's policy-rc.d: while /usr/sbin/policy-rc.d exits 101, invoke-rc.d
# and deb-systemd-invoke (what maintainer scripts call) start no service,
# under systemd or not.  Ours is there only during our apt-get install, and
# says so on its second line; a policy-rc.d of the machine's is never
# replaced, moved or removed.
SSLR_POLICY_RC=/usr/sbin/policy-rc.d
SSLR_POLICY_MARK='# ssl_renegotiate: temporary, during an apt-get install of scripts/packages.sh'
# one of our installs at a time (two runs at once: one must not remove the
# policy-rc.d while the other installs)
SSLR_APT_LOCK=/run/lock/ssl_renegotiate-apt.lock

# sslr_apt_get ARG...: apt-get ARG... (install, build-dep; noninteractive,
# waiting for dpkg's lock), with no service started by the packages it
# installs.
sslr_apt_get() {
    (
        mkdir -p "${SSLR_APT_LOCK%/*}"
        exec 8>"$SSLR_APT_LOCK"
        flock -n 8 || { printf '==> waiting for another run'"'"'s package installation\n' >&2; flock 8; }
        ours=
        if [ -e "$SSLR_POLICY_RC" ] && [ "$(sed -n 2p "$SSLR_POLICY_RC")" != "$SSLR_POLICY_MARK" ]; then
            if [ "$(sh "$SSLR_POLICY_RC" x start >/dev/null 2>&1; echo $?)" = 101 ]; then
                printf '==> the machine'"'"'s %s forbids service starts: left as it is\n' "$SSLR_POLICY_RC" >&2
            else
                printf '==> NOTE: the machine has its own %s (left as it is); it may let these packages start their services\n' \
                    "$SSLR_POLICY_RC" >&2
            fi
        else
            # ours (a run that was killed may have left one: the lock says
            # nobody else uses it), removed when this subshell ends, however
            ours=1
            trap 'rm -f "$SSLR_POLICY_RC"' EXIT
            trap 'exit 130' INT
            trap 'exit 143' TERM
            printf '#!/bin/sh\n%s\nexit 101\n' "$SSLR_POLICY_MARK" >"$SSLR_POLICY_RC.sslr-tmp"
            chmod 755 "$SSLR_POLICY_RC.sslr-tmp"
            mv -f "$SSLR_POLICY_RC.sslr-tmp" "$SSLR_POLICY_RC"
        fi
        rc=0
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@" || rc=$?
        [ -z "$ours" ] || printf '==> no service was started (temporary %s, removed)\n' "$SSLR_POLICY_RC" >&2
        exit "$rc"
    )
}

# sslr_install_packages PKG...: apt-get update and install only if one of
# them is missing; says which on stderr.
sslr_install_packages() {
    local p missing=()
    for p in "$@"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] ||
            missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        printf '==> all required packages are installed\n' >&2
        return 0
    fi
    printf '==> installing missing packages: %s\n' "${missing[*]}" >&2
    # another script of ours (a build ahead of its turn) may hold apt's locks
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq
    sslr_apt_get install -y -qq --no-install-recommends "${missing[@]}" >&2
}
