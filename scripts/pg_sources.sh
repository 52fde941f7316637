# shellcheck shell=bash
# pg_sources.sh -- PostgreSQL sources other than Debian's packages: a
# directory of tarballs, each pinned by its checksum (SSLR_PG_SOURCES), or
# one source tree (SSLR_PG_SOURCE).  Sourced by pg_build.sh; defines functions only.

# sslr_tree_version TREE: the version a source tree's configure.ac gives
# (19beta2, 20devel, 16.14), or the reason it has none.
sslr_tree_version() {
    local tree=$1 v
    [ -f "$tree/configure.ac" ] || { echo "$tree is no PostgreSQL source tree (no configure.ac)"; return 1; }
    [ -x "$tree/configure" ] || { echo "$tree has no configure script"; return 1; }
    v=$(sed -nE 's/^AC_INIT\(\[PostgreSQL\], \[([^]]+)\].*/\1/p' "$tree/configure.ac" | head -n 1)
    [ -n "$v" ] || { echo "$tree/configure.ac names no PostgreSQL version"; return 1; }
    echo "$v"
}

# sslr_tree_major TREE: its major (the leading number of its version).
sslr_tree_major() {
    local v
    v=$(sslr_tree_version "$1") || { echo "$v"; return 1; }
    echo "${v%%[!0-9]*}"
}

# sslr_tree_identity TREE: what a build of TREE is known by, first line
# for people ("git tree /src/postgres at 1a2b3c4d5e6f (REL_19_STABLE)").
sslr_tree_identity() {
    local tree commit
    tree=$(cd "$1" && pwd)
    if commit=$(git -c safe.directory='*' -C "$tree" rev-parse --short=12 HEAD 2>/dev/null); then
        echo "git tree $tree at $commit ($(git -c safe.directory='*' -C "$tree" rev-parse --abbrev-ref HEAD))"
    else
        echo "source tree $tree"
    fi
}

# sslr_tree_changed_since TREE MARKER: true if a file of TREE (outside
# .git) is newer than MARKER -- a commit checked out, a file edited.
sslr_tree_changed_since() {
    [ -n "$(find "$1" -path "$1/.git" -prune -o -type f -newer "$2" -print -quit 2>/dev/null)" ]
}

# sslr_pg_tarball DIR MAJOR: the newest postgresql-MAJOR<version>.tar.* in
# DIR, checked against the checksum DIR/SHA256SUMS lists for it (or, for a
# directory of postgresql.org's downloads, FILE.sha256 beside it).  Prints
# "SHA256 PATH"; returns 2 with nothing printed if DIR has no tarball of
# MAJOR, and 1 with the reason if the one it has is refused: one that no
# checksum names, or that does not match it.
sslr_pg_tarball() {
    local dir=$1 major=$2 file line sum actual
    [ -d "$dir" ] || return 2
    # 16.14, 19beta2, 20devel; not 160.x
    file=$(find "$dir" -maxdepth 1 -type f -name "postgresql-${major}[.a-z]*.tar.*" \
               ! -name '*.asc' ! -name '*.sig' ! -name '*.sha256' ! -name '*.md5' -printf '%f\n' |
           sort -V | tail -n 1)
    [ -n "$file" ] || return 2
    line=
    [ ! -f "$dir/SHA256SUMS" ] ||
        line=$(awk -v f="$file" '{ n = $2; sub(/^\*/, "", n) } n == f { print; exit }' "$dir/SHA256SUMS")
    [ -n "$line" ] || [ ! -f "$dir/$file.sha256" ] || line=$(head -n 1 "$dir/$file.sha256")
    if [ -z "$line" ]; then
        echo "$dir/$file has no checksum (no line in $dir/SHA256SUMS, no $file.sha256 beside it): refused;" \
            "after checking it, write one: (cd $dir && sha256sum $file >>SHA256SUMS)"
        return 1
    fi
    sum=${line%%[[:space:]]*}
    [[ "$sum" =~ ^[0-9a-fA-F]{64}$ ]] || { echo "the checksum line of $file is no SHA-256 ('$line'): refused"; return 1; }
    actual=$(sha256sum "$dir/$file" | awk '{ print $1 }')
    [ "${actual,,}" = "${sum,,}" ] ||
        { echo "$dir/$file does not match its SHA-256 checksum ($actual, not $sum): refused"; return 1; }
    printf '==> %s matches its SHA-256 checksum\n' "$file" >&2
    echo "$actual $dir/$file"
}

# sslr_unpack_tarball TARBALL WORKDIR: unpacks it into WORKDIR, prints the
# source tree it made.
sslr_unpack_tarball() {
    local tarball=$1 work=$2 top
    top=$(tar -tf "$tarball" | head -n 1)
    top=${top%%/*}
    [ -n "$top" ] || { echo "$tarball is empty" >&2; return 1; }
    tar -xf "$tarball" -C "$work" || return 1
    [ -f "$work/$top/configure.ac" ] || { echo "$tarball holds no source tree" >&2; return 1; }
    echo "$work/$top"
}
