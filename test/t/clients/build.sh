#!/bin/bash
# build.sh OUTDIR [gnutls] [rustls] -- builds the clients of test/t/clients/ into
# OUTDIR (both when none is named):
#
#   OUTDIR/gnutls_copy   test/t/clients/gnutls_copy.c against Debian's GnuTLS,
#                        with -Wall -Wextra -Werror;
#   OUTDIR/rustls_copy   test/t/clients/rustls/ with Debian's cargo and rustc,
#                        offline, from Debian's packaged crates only
#                        (/usr/share/cargo/registry: .cargo/config.toml).
#
# The Debian packages each needs (scripts/packages.sh lists them for
# scripts/test.sh too) are installed first if one is missing and we are
# root (apt-get install of the missing ones, nothing removed or
# reconfigured, no service started: packages.sh's sslr_install_packages).
# Not root (the TAP tests run as the server's user) with one missing: it
# says which on stderr and exits 77, which test/t/025 takes as "skip".
#
# The rustls client is built in a copy of its directory under OUTDIR, so
# the tree stays as it is (Cargo.lock included: cargo writes one there,
# resolved against whatever crate versions Debian has); cargo's target
# directory is kept in SSLR_CLIENTS_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/ssl_renegotiate/clients), so that a
# second build takes seconds rather than minutes.  -j2 at most.
#
# Exit status: 0 built, 77 packages missing and not root, 1 a build failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
out=${1:?usage: build.sh OUTDIR [gnutls] [rustls]}
shift
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(gnutls rustls)

# shellcheck source=../../../scripts/packages.sh
. "$top/scripts/packages.sh"

mkdir -p "$out"
out=$(cd "$out" && pwd)

need=()
for w in "${what[@]}"; do
    # shellcheck disable=SC2206 # the lists: one package a word
    case "$w" in
        gnutls) need+=($SSLR_GNUTLS_CLIENT_PACKAGES) ;;
        rustls) need+=($SSLR_RUSTLS_CLIENT_PACKAGES) ;;
        *) echo "build.sh: unknown client '$w' (gnutls, rustls)" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${need[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        sslr_install_packages "${missing[@]}" || {
            echo "build.sh: could not install: ${missing[*]}" >&2
            exit 77
        }
    else
        echo "build.sh: missing Debian packages (run as root, or scripts/setup.sh): ${missing[*]}" >&2
        exit 77
    fi
fi

for w in "${what[@]}"; do
    case "$w" in
        gnutls)
            # shellcheck disable=SC2046 # pkg-config's words
            cc -O2 -Wall -Wextra -Werror -o "$out/gnutls_copy" "$here/gnutls_copy.c" \
                $(pkg-config --cflags --libs gnutls)
            echo "build.sh: $out/gnutls_copy (GnuTLS $(pkg-config --modversion gnutls))" >&2
            ;;
        rustls)
            src="$out/rustls-src"
            rm -rf "$src"
            mkdir -p "$src"
            cp -R "$here/rustls/Cargo.toml" "$here/rustls/src" "$here/rustls/.cargo" "$src/"
            cache=${SSLR_CLIENTS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/ssl_renegotiate/clients}
            mkdir -p "$cache"
            # Debian's toolchain, whatever PATH and rustup say; a CARGO_HOME
            # of our own (no user config, no registry cache)
            (
                cd "$src"
                env -u RUSTUP_TOOLCHAIN -u CARGO_BUILD_TARGET \
                    PATH=/usr/bin:/bin RUSTC=/usr/bin/rustc \
                    CARGO_HOME="$out/cargo-home" CARGO_TARGET_DIR="$cache/rustls-target" \
                    /usr/bin/cargo build --release --offline --quiet -j 2
            )
            cp "$cache/rustls-target/release/rustls_copy" "$out/rustls_copy"
            echo "build.sh: $out/rustls_copy ($(/usr/bin/rustc --version);" \
                "$(awk '/^name = /{n=$3} /^version = /{if (n ~ /^"(rustls|tokio-rustls|tokio-postgres)"$/) printf "%s %s ", n, $3}' \
                    "$src/Cargo.lock" | tr -d '"'))" >&2
            ;;
    esac
done
