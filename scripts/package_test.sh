#!/usr/bin/env bash
# package_test.sh -- the Debian package (debian/) as a DBA gets it: built,
# linted, installed, and tested on the installed files.  Run as root;
# scripts/test.sh runs it after the PostgreSQL majors.
#
# In $SSLR_PACKAGE_WORKDIR (a directory this script made, replaced; by
# default a new one, mktemp -d /tmp/ssl_renegotiate-package.XXXXXX), left
# for inspection (test.sh removes its run's directory when nothing failed):
#   1. src/: a copy of the tree, the orig tarball made from it (less
#      debian/), and, as postgres, dpkg-buildpackage -us -uc: the .deb and
#      .changes land in src/;
#   2. lintian on the .changes: no error (every tag is printed);
#   3. installs the package for Debian's PostgreSQL 15 with apt-get (over
#      whatever is installed, with no service started: scripts/packages.sh;
#      it is never removed here: other servers on this machine may be using
#      its files; dpkg renames each file into place);
#   4. dpkg --verify, dpkg -L: the extension's files on disk are the
#      package's;
#   5. test/: a second copy of the tree, where nothing is built (checked: no
#      .o, no .so): debian/tests/installcheck (the autopkgtest: both
#      pg_regress suites on the installed files), then one TAP file;
#   6. dpkg --verify again: those tests ran on the package's files.
# Steps 1-6 print "package check ok: WHAT" or "package check FAILED: WHAT",
# pg_regress and prove their own summaries; test.sh counts both.  The exit
# status is non-zero if anything failed.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
. "$SSLR_REPO/scripts/packages.sh"
. "$SSLR_REPO/scripts/copy_tree.sh"

sslr_require_root package_test.sh

MAJOR=15
PG_CONFIG=/usr/lib/postgresql/$MAJOR/bin/pg_config
# shellcheck disable=SC2034 # sslr_as_postgres puts it first in PATH
PG_BINDIR=$(dirname "$PG_CONFIG")
TAP_FILE=test/t/001_accounting.pl
PKG_WORKDIR=${SSLR_PACKAGE_WORKDIR:-}
MARKER=.ssl_renegotiate-package-workdir

failures=0
SSLR_CHECK_KIND=package
check() { sslr_check "$@"; }
# A step the later ones need: stop here if it failed.
require() {
    check "$@"
    [ "$failures" -eq 0 ] || { echo "package_test.sh: stopped after '$1'"; exit 1; }
}

if [ -z "$PKG_WORKDIR" ]; then
    PKG_WORKDIR=$(mktemp -d /tmp/ssl_renegotiate-package.XXXXXX)
    chmod 755 "$PKG_WORKDIR"
    touch "$PKG_WORKDIR/$MARKER"
fi
case "$PKG_WORKDIR" in
    /?*) ;;
    *) echo "package_test.sh: SSLR_PACKAGE_WORKDIR must be an absolute path" >&2; exit 1 ;;
esac
if [ -e "$PKG_WORKDIR" ]; then
    # Only ever delete a directory this script made.
    [ -f "$PKG_WORKDIR/$MARKER" ] ||
        { echo "package_test.sh: $PKG_WORKDIR was not made by package_test.sh" >&2; exit 1; }
    rm -rf "$PKG_WORKDIR"
fi
mkdir -p "$PKG_WORKDIR"
touch "$PKG_WORKDIR/$MARKER"

# dpkg-dev (dpkg-parsechangelog, dpkg-buildpackage) before its first use
echo "=== build tools ==="
sslr_install_packages dpkg-dev lintian
source_name=$(dpkg-parsechangelog -l "$SSLR_REPO/debian/changelog" -S Source)
version=$(dpkg-parsechangelog -l "$SSLR_REPO/debian/changelog" -S Version)
upstream_version=${version%-*}
package=$(sed -n "s/^Package: \(.*\)PGVERSION/\1$MAJOR/p" "$SSLR_REPO/debian/control.in")
tree=$PKG_WORKDIR/src/$source_name-$upstream_version
testdir=$PKG_WORKDIR/test
mkdir -p "$tree" "$testdir"
sslr_copy_tree "$SSLR_REPO" "$tree"
sslr_copy_tree "$SSLR_REPO" "$testdir"
tar -C "$PKG_WORKDIR/src" --exclude="$source_name-$upstream_version/debian" \
    -cJf "$PKG_WORKDIR/src/${source_name}_$upstream_version.orig.tar.xz" "$source_name-$upstream_version"
chown -R postgres:postgres "$PKG_WORKDIR"

# ------------------------------------------------------------- 1. build
echo "=== debian/control's Build-Depends ==="
if ! (cd "$tree" && dpkg-checkbuilddeps) 2>/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    sslr_apt_get build-dep -y -qq --no-install-recommends "$tree" >&2
fi

# The README's own commands, as shown (scripts/doc_examples.pl): the source
# install in a copy of the tree, and the package recipe in the clone (it
# packages HEAD, through git).  Each installs what the checks below then
# replace with this script's own build.
readme_example() { # readme_example NAME DIR: run the README's block NAME from DIR's tree
    perl "$2/scripts/doc_examples.pl" run "$1" >"$PKG_WORKDIR/$1.log" 2>&1 ||
        { tail -n 40 "$PKG_WORKDIR/$1.log"; return 1; }
}
echo "=== the README's source install (log: $PKG_WORKDIR/install-from-source.log) ==="
mkdir -p "$PKG_WORKDIR/source-install"
sslr_copy_tree "$SSLR_REPO" "$PKG_WORKDIR/source-install"
check "the README's source install (make, make install) works as shown" \
    readme_example install-from-source "$PKG_WORKDIR/source-install"
echo "=== the README's package recipe (log: $PKG_WORKDIR/package-recipe.log) ==="
# a clone that root does not own is still read (git's safe.directory)
recipe_in_clone() {
    (export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
     readme_example package-recipe "$SSLR_REPO")
}
check "the README's package recipe builds and installs $package as shown" recipe_in_clone

echo "=== dpkg-buildpackage -us -uc in $tree (as postgres; log: $PKG_WORKDIR/build.log) ==="
build() {
    sslr_as_postgres "$tree" dpkg-buildpackage -us -uc >"$PKG_WORKDIR/build.log" 2>&1 ||
        { tail -n 60 "$PKG_WORKDIR/build.log"; return 1; }
}
deb=$PKG_WORKDIR/src/${package}_${version}_$(dpkg --print-architecture).deb
changes=$PKG_WORKDIR/src/${source_name}_${version}_$(dpkg --print-architecture).changes
require "dpkg-buildpackage builds $(basename "$deb")" build
echo "built: $(cd "$PKG_WORKDIR/src" && echo *.deb *.dsc *.changes)"

# ------------------------------------------------------------ 2. lintian
echo "=== lintian --pedantic --display-info $(basename "$changes") ==="
check "lintian reports no error" \
    sslr_as_postgres "$PKG_WORKDIR/src" lintian --pedantic --display-info --fail-on error "$changes"

# ------------------------------------------------------------ 3. install
echo "=== installing $(basename "$deb") ==="
install_deb() {
    # waits for the dpkg lock: other scripts on this machine may hold it
    sslr_apt_get install -y -qq --reinstall --no-install-recommends \
        "$deb" >"$PKG_WORKDIR/install.log" 2>&1 ||
        { cat "$PKG_WORKDIR/install.log"; return 1; }
    [ "$(dpkg-query -W -f='${Status} ${Version}' "$package")" = "install ok installed $version" ]
}
require "$package $version is installed" install_deb

# --------------------------------------------------------- 4. the files
# The files the server loads: the library, the control file, the scripts.
extension_files=("$("$PG_CONFIG" --pkglibdir)/ssl_renegotiate.so"
                 "$("$PG_CONFIG" --sharedir)/extension/ssl_renegotiate.control")
for f in "$tree"/sql/ssl_renegotiate--*.sql; do
    extension_files+=("$("$PG_CONFIG" --sharedir)/extension/${f##*/}")
done
listed_by_package() {
    local f listed=0
    for f in "${extension_files[@]}"; do
        if dpkg -L "$package" | grep -qxF "$f" && [ -f "$f" ]; then
            listed=$((listed + 1))
        else
            echo "not installed by $package: $f"
        fi
    done
    [ "$listed" -eq "${#extension_files[@]}" ]
}
# dpkg --verify prints one line per file whose checksum differs from the
# package's (or that is missing), and nothing when all are as installed.
verified() {
    local out
    if out=$(dpkg --verify "$package" 2>&1) && [ -z "$out" ]; then
        return 0
    fi
    printf '%s\n' "$out"
    return 1
}
check "dpkg -L $package lists the ${#extension_files[@]} files of the extension" listed_by_package
check "dpkg --verify: the files on disk are the package's" verified

# ---------------------------------------------------- 5. tests, unbuilt
nothing_built() {
    local built
    built=$(find "$testdir" -name '*.o' -o -name '*.so' -o -name '*.bc')
    [ -z "$built" ] || { printf '%s\n' "$built"; return 1; }
}
check "the test directory $testdir holds no built file" nothing_built

echo "=== debian/tests/installcheck in $testdir (pg_regress on the installed files) ==="
set +e
sslr_as_postgres "$testdir" debian/tests/installcheck
regress_rc=$?
echo "=== $TAP_FILE in $testdir on the installed files ==="
sslr_as_postgres "$testdir" make USE_PGXS=1 PG_CONFIG="$PG_CONFIG" check-tap \
    PROVE_TESTS="$TAP_FILE"
tap_rc=$?
set -e

# ------------------------------------------------------ 6. still ours
check "dpkg --verify after the tests: they ran on the package's files" verified

echo "=== the Debian package's steps took $SECONDS s ==="
[ "$failures" -eq 0 ] && [ "$regress_rc" -eq 0 ] && [ "$tap_rc" -eq 0 ]
