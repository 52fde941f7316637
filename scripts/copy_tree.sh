# shellcheck shell=bash
# copy_tree.sh -- copy a checkout without its build products.  Sourced by
# setup.sh and package_test.sh; defines one function.

# sslr_copy_tree SRC DEST: the files of checkout SRC into directory DEST
# (which exists): tracked plus untracked, non-ignored files; never .git,
# build or test output, nor a work directory's marker.
sslr_copy_tree() {
    local src=$1 dest=$2
    if command -v git >/dev/null 2>&1 &&
        git -c safe.directory='*' -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        # Tracked (-c) and untracked-but-not-ignored (-o --exclude-standard)
        # files; skip tracked files deleted from the work tree, and build or
        # test output of an in-tree build in case .gitignore lacks it.
        git -c safe.directory='*' -C "$src" ls-files -z -c -o --exclude-standard |
            while IFS= read -r -d '' f; do
                [ -e "$src/$f" ] || [ -L "$src/$f" ] || continue
                case "$f" in
                    *.o | *.so | *.bc | results/* | tmp_check/* | log/* | \
                        output_iso/* | regression.diffs | regression.out | .ssl_renegotiate-workdir)
                        continue ;;
                esac
                printf '%s\0' "$f"
            done |
            (cd "$src" && tar --null --no-recursion -T - -cf -) |
            (cd "$dest" && tar -xf -)
    else
        # Not a git checkout: copy everything except VCS data and build output.
        (cd "$src" && tar -cf - \
            --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
            --exclude=./tmp_check --exclude=./results --exclude=./log \
            --exclude=./regression.diffs --exclude=./regression.out \
            --exclude=./.ssl_renegotiate-workdir .) |
            (cd "$dest" && tar -xf -)
    fi
}
