# debsrc.sh -- Debian's source package of something, downloaded through a
# private apt configuration (the system's apt sources are never touched).
# Sourced by pg_build.sh and openssl_build.sh; defines functions only.

. "$(dirname "${BASH_SOURCE[0]}")/apt_sources.sh"

# sslr_built_before MARKER FILE: true (saying so) if an earlier run left
# its MARKER and the FILE it installed.
sslr_built_before() {
    [ -f "$1" ] && [ -e "$2" ] || return 1
    printf '==> cached: %s\n' "$(cat "$1")" >&2
}

# sslr_debian_source APTDIR WORKDIR PACKAGE VERSION_REGEX SUITE...
#
# Writes APTDIR/sources.list with deb-src lines for the SUITEs, on the
# archive and security URIs of the system's own apt sources
# (scripts/apt_sources.sh: a mirror or proxy configured there is used; a
# name ending in -security comes from the security archive), signed by
# debian-archive-keyring, reads their indexes into APTDIR, and tries every
# version of PACKAGE they list that matches VERSION_REGEX (an extended
# regular expression), newest first -- packages move between suites, and a
# mirror may list a version it does not serve: the first whose files
# download into WORKDIR (emptied first) is taken.  Prints that version;
# returns non-zero with the reason on stderr if there is none.
sslr_debian_source() {
    local apt=$1 work=$2 package=$3 regex=$4 suite v
    shift 4
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    sslr_debian_uris || return 1
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
    # APTDIR is shared by the builds of every major: one reader or writer
    # of its sources.list and indexes at a time (a build of 16 and one of 17
    # at once, from two runs), until the versions are listed
    exec 7>"$apt.lock"
    flock 7
    for suite in "$@"; do
        case "$suite" in
            *-security)
                [ -z "$SSLR_SECURITY_URI" ] ||
                    echo "deb-src [signed-by=$keyring] $SSLR_SECURITY_URI $suite main" ;;
            *) echo "deb-src [signed-by=$keyring] $SSLR_ARCHIVE_URI $suite main" ;;
        esac
    done >"$apt/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
                -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
                -o APT::Sandbox::User=root)
    printf '==> reading Debian source indexes (%s)\n' "$*" >&2
    apt-get "${opts[@]}" update -qq >&2 ||
        { exec 7>&-; echo "apt-get update of the private sources in $apt failed" >&2; return 1; }

    local versions=()
    mapfile -t versions < <(apt-cache "${opts[@]}" showsrc "$package" 2>/dev/null |
        awk '/^Version:/ { print $2 }' | grep -E "$regex" | sort -u | sort -r -V)
    exec 7>&-
    [ ${#versions[@]} -gt 0 ] ||
        { echo "no suite ($*) offers a source package $package matching $regex" >&2; return 1; }
    for v in "${versions[@]}"; do
        rm -rf "$work"
        mkdir -p "$work"
        if (cd "$work" && apt-get "${opts[@]}" source --download-only -qq "$package=$v" >&2); then
            echo "$v"
            return 0
        fi
        printf '==> %s %s is listed but does not download; trying the next\n' "$package" "$v" >&2
    done
    echo "none of the listed versions of $package (${versions[*]}) could be downloaded" >&2
    return 1
}

# sslr_unpack_upstream WORKDIR PACKAGE: unpacks the upstream tarball
# (PACKAGE_VERSION.orig.tar.*) that sslr_debian_source downloaded into
# WORKDIR, and prints the directory it made.
sslr_unpack_upstream() {
    local work=$1 package=$2 tarball srcdir
    tarball=$(ls "$work/${package}"_*.orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -n 1 || true)
    [ -n "$tarball" ] || { echo "no upstream tarball of $package in $work" >&2; return 1; }
    tar -xf "$tarball" -C "$work"
    srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
    [ -n "$srcdir" ] || { echo "the upstream tarball of $package made no directory" >&2; return 1; }
    echo "$srcdir"
}
