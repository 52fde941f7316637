# packages.sh -- install the Debian packages that are missing (as root).
# Sourced by setup.sh and pg_build.sh; defines one function.

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
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "${missing[@]}" >&2
}
