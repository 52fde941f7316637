# shellcheck shell=bash
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
# Each SUITE has a private apt configuration of its own, APTDIR/SUITE: a
# sources.list with one deb-src line, on the archive or security URI of the
# system's own apt sources (scripts/apt_sources.sh: a mirror or proxy
# configured there is used; a name ending in -security comes from the
# security archive), signed by debian-archive-keyring, and its own indexes.
# Each is read by an update of its own, so a suite that cannot be read (a
# Release file whose Valid-Until has passed, a suite the mirror lacks) is
# skipped with a line saying why, and never hides another's indexes; apt's
# checks (signatures, Valid-Until) are the machine's, never weakened here.
# Give only the suites that carry PACKAGE.  Every version of PACKAGE that
# they list and that matches VERSION_REGEX (an extended regular expression)
# is tried, newest first -- packages move between suites, and a mirror may
# list a version it does not serve: the first whose files download into
# WORKDIR (emptied first) is taken.  Prints that version; returns non-zero
# with the reason on stderr if there is none.
sslr_debian_source() {
    local apt=$1 work=$2 package=$3 regex=$4 suite v uri err
    shift 4
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    sslr_debian_uris || return 1
    mkdir -p "$apt"
    # APTDIR is shared by the builds of every major: one reader or writer
    # of its sources and indexes at a time (a build of 16 and one of 17 at
    # once, from two runs), until the versions are listed
    exec 7>"$apt.lock"
    flock 7
    # the single list of every suite that earlier versions kept here
    rm -rf "$apt/sources.list" "$apt/lists" "$apt/cache"
    local found=() unread=() read_ok=() opts=()
    for suite in "$@"; do
        uri=$SSLR_ARCHIVE_URI
        case "$suite" in
            *-security)
                uri=$SSLR_SECURITY_URI
                [ -n "$uri" ] || { unread+=("$suite (no security archive in the apt sources)"); continue; } ;;
        esac
        mkdir -p "$apt/$suite/lists/partial" "$apt/$suite/cache/archives/partial"
        echo "deb-src [signed-by=$keyring] $uri $suite main" >"$apt/$suite/sources.list"
        printf '==> reading the Debian source index of %s (%s)\n' "$suite" "$package" >&2
        sslr_debian_source_opts "$apt/$suite"
        if ! apt-get "${opts[@]}" update -qq >"$apt/$suite/update.log" 2>&1; then
            # apt's own reason: "Release file for ... is expired (invalid since ...)"
            err=$(grep -m 1 -E '^(E|Err):' "$apt/$suite/update.log" | sed -E 's/^(E|Err): *//
                s/^Release file for .* is expired \(invalid since ([^)]*)\).*/its Release file expired \1 ago (Valid-Until)/' || true)
            printf '==> %s cannot be read, skipped: %s\n' "$suite" "${err:-see $apt/$suite/update.log}" >&2
            unread+=("$suite (${err:-apt-get update failed})")
            continue
        fi
        read_ok+=("$suite")
        # "VERSION SUITE", one per version this suite lists
        while read -r v; do
            found+=("$v $suite")
        done < <(apt-cache "${opts[@]}" showsrc "$package" 2>/dev/null |
            awk '/^Version:/ { print $2 }' | grep -E "$regex" | sort -u)
    done
    exec 7>&-
    if [ ${#found[@]} -eq 0 ]; then
        if [ ${#read_ok[@]} -eq 0 ]; then
            printf 'no suite that carries %s could be read: %s\n' "$package" "${unread[*]}" >&2
        else
            printf 'no source package %s matching %s in %s%s\n' "$package" "$regex" "${read_ok[*]}" \
                "${unread[*]:+ (not readable: ${unread[*]})}" >&2
        fi
        return 1
    fi
    local tried=()
    while read -r v suite; do
        rm -rf "$work"
        mkdir -p "$work"
        sslr_debian_source_opts "$apt/$suite"
        if (cd "$work" && apt-get "${opts[@]}" source --download-only -qq "$package=$v" >"$apt/$suite/source.log" 2>&1); then
            printf '==> %s %s from %s\n' "$package" "$v" "$suite" >&2
            echo "$v"
            return 0
        fi
        err=$(grep -m 1 -E '^(E|Err):' "$apt/$suite/source.log" | sed -E 's/^(E|Err): *//' || true)
        printf '==> %s %s (%s) is listed but does not download (%s); trying the next\n' \
            "$package" "$v" "$suite" "${err:-see $apt/$suite/source.log}" >&2
        tried+=("$v")
    done < <(printf '%s\n' "${found[@]}" | sort -u | sort -r -V -k1,1)
    echo "none of the listed versions of $package (${tried[*]}) could be downloaded" >&2
    return 1
}

# sslr_debian_source_opts DIR: sets the caller's array opts to apt's
# options for the private configuration of one suite in DIR (its
# sources.list, indexes and cache).
sslr_debian_source_opts() {
    opts=(-o "Dir::Etc::SourceList=$1/sources.list" -o Dir::Etc::SourceParts=/nonexistent
          -o "Dir::State::Lists=$1/lists" -o "Dir::Cache=$1/cache" -o APT::Sandbox::User=root)
}

# sslr_unpack_upstream WORKDIR PACKAGE: unpacks the upstream tarball
# (PACKAGE_VERSION.orig.tar.*) that sslr_debian_source downloaded into
# WORKDIR, and prints the directory it made.
sslr_unpack_upstream() {
    local work=$1 package=$2 tarball srcdir f
    tarball=
    for f in "$work/${package}"_*.orig.tar.*; do
        case "$f" in *.asc) continue ;; esac
        [ -f "$f" ] && { tarball=$f; break; }
    done
    [ -n "$tarball" ] || { echo "no upstream tarball of $package in $work" >&2; return 1; }
    tar -xf "$tarball" -C "$work"
    srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
    [ -n "$srcdir" ] || { echo "the upstream tarball of $package made no directory" >&2; return 1; }
    echo "$srcdir"
}
