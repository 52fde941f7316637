#!/usr/bin/env bash
# modules.sh -- the modules of the extension and the two graphs between them,
# checked (docs/internals.md).  Run by "make lint".
#
#   scripts/modules.sh [--src DIR] OBJECT...
#   scripts/modules.sh --self-test
#
# A module is a C file and the header of the same name (foo.c, foo.h), in
# the same folder of DIR; a header with no C file of its name (the common types,
# sslr_types.h; compat.h) is a module of its own that calls nothing.  A module
# is named by its file name, which is unique in DIR.  Two graphs join the
# modules:
#   - includes: the project's own headers that each file #includes, read
#     from the sources (in DIR, default src/ beside this script's folder;
#     an #include names a header from DIR: "stats/slots.h");
#   - references: the functions each object file calls, and the data it
#     reads or writes, in another module's object (nm).
# It prints both, then fails (exit 1) if
#   - the includes form a cycle, or the calls do;
#   - a C file calls a function, or uses data, of another module without
#     including that module's header itself (so its #include lines are its
#     list of dependencies).
# A C file of more than SSLR_MODULE_WARN_LINES lines (800) gets a warning:
# a file is as long as its one responsibility needs, and a long one is a
# prompt to look at its cohesion, not a reason to split it.
# --self-test plants each kind of breakage in a small tree of its own and
# checks that it is caught.
set -euo pipefail

WARN_LINES=${SSLR_MODULE_WARN_LINES:-800}
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

usage() { echo "usage: $0 [--src DIR] OBJECT... | --self-test" >&2; exit 2; }

# ---------------------------------------------------------------- self-test
# A tree of three modules: common.h (types), low (a function and a variable)
# and high (calls low's function, reads its variable); then one variant per
# kind of breakage.  Each must fail with its own message; the clean tree
# must pass.
self_test() {
    local rc=0
    t=$(mktemp -d /tmp/sslr-modules-test.XXXXXX)
    trap 'rm -rf "$t"' EXIT

    plant() { # variant
        rm -rf "${t:?}/$1"
        mkdir "$t/$1"
        cat >"$t/$1/common.h" <<'EOF'
typedef int Count;
EOF
        cat >"$t/$1/low.h" <<'EOF'
#include "common.h"
extern Count low_data;
extern Count low_f(void);
EOF
        cat >"$t/$1/low.c" <<'EOF'
#include "low.h"
Count low_data;
Count low_f(void) { return 1; }
EOF
        cat >"$t/$1/high.h" <<'EOF'
#include "common.h"
extern Count high_f(void);
EOF
        cat >"$t/$1/high.c" <<'EOF'
#include "high.h"
#include "low.h"
Count high_f(void) { return low_f() + low_data; }
EOF
    }
    build() { # variant
        (cd "$t/$1" && for src in *.c; do cc -c -o "${src%.c}.o" "$src"; done)
    }
    expect() { # variant expected-status message-or-empty
        local out status=0
        out=$(cd "$t/$1" && bash "$SELF" --src . ./*.o 2>&1) || status=$?
        if [ "$status" -ne "$2" ] || { [ -n "$3" ] && ! grep -q -- "$3" <<<"$out"; }; then
            echo "modules.sh self-test: '$1' gave exit $status, expected $2${3:+ with \"$3\"}:" >&2
            # shellcheck disable=SC2001 # each line, indented
            sed 's/^/    /' <<<"$out" >&2
            rc=1
        else
            echo "modules.sh self-test: $1: exit $status${3:+, \"$3\"}"
        fi
    }

    plant clean
    build clean
    expect clean 0 ""

    # low.h includes high.h: an include cycle (no call needs it)
    plant include-cycle
    sed -i '1i #include "high.h"' "$t/include-cycle/low.h"
    build include-cycle
    expect include-cycle 1 "the includes form a cycle"

    # low calls high, declaring the function itself: a call cycle
    plant call-cycle
    cat >"$t/call-cycle/low.c" <<'EOF'
#include "low.h"
extern Count high_f(void);
Count low_data;
Count low_f(void) { return low_data ? high_f() : 1; }
EOF
    build call-cycle
    expect call-cycle 1 "the calls form a cycle"

    # high calls low without including low.h
    plant no-include
    cat >"$t/no-include/high.c" <<'EOF'
#include "high.h"
extern Count low_f(void);
Count high_f(void) { return low_f(); }
EOF
    build no-include
    expect no-include 1 "high.c calls low_f() of low.c without including low.h"

    # high uses low's data without including low.h
    plant data-no-include
    cat >"$t/data-no-include/high.c" <<'EOF'
#include "high.h"
extern Count low_data;
Count high_f(void) { return low_data; }
EOF
    build data-no-include
    expect data-no-include 1 "high.c uses low_data of low.c without including low.h"

    return $rc
}

# ------------------------------------------------------------------- check
SRC=$(dirname "$(dirname "$SELF")")/src
case ${1:-} in
    --self-test) self_test; exit ;;
    --src) [ $# -ge 2 ] || usage; SRC=$2; shift 2 ;;
esac
[ $# -gt 0 ] || usage

module_of() { local b=${1##*/}; echo "${b%.*}"; }

# references: "caller-module callee-module symbol kind" (kind: call or data),
# from the object files; a symbol's module is the object that defines it
refs=$(
    for o in "$@"; do
        nm --defined-only "$o" | awk -v r="$(module_of "$o")" '
            $2 ~ /^[TDBRCGS]$/ { print "D", $3, r, ($2 == "T" ? "call" : "data") }'
    done
    for o in "$@"; do
        nm --undefined-only "$o" | awk -v r="$(module_of "$o")" '{ print "U", $2, r }'
    done
)
refs=$(awk '
    $1 == "D" { def[$2] = $3; kind[$2] = $4; next }
    $1 == "U" && ($2 in def) && def[$2] != $3 { print $3, def[$2], $2, kind[$2] }
' <<<"$refs" | sort -u)

# the project's files, by name: "slots.c" -> "DIR/stats/slots.c"
declare -A path_of=()
while IFS= read -r -d '' p; do
    b=${p##*/}
    [ -z "${path_of[$b]:-}" ] || { echo "modules.sh: two files named $b: ${path_of[$b]} and $p" >&2; exit 2; }
    path_of[$b]=$p
done < <(find "$SRC" -name '*.[ch]' -print0)

# includes: "file included-file" (by name), from every C file of an object
# and every header of the project that one of them reaches
declare -A seen=()
queue=()
for o in "$@"; do queue+=("$(module_of "$o").c"); done
includes=""
while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}
    queue=("${queue[@]:1}")
    [ -z "${seen[$f]:-}" ] || continue
    seen[$f]=1
    [ -n "${path_of[$f]:-}" ] || { echo "modules.sh: $f not found in $SRC" >&2; exit 2; }
    while read -r h; do
        [ -f "$SRC/$h" ] || continue    # not one of ours
        includes+="$f ${h##*/}"$'\n'
        queue+=("${h##*/}")
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "${path_of[$f]}")
done
module_includes=$(awk 'NF { sub(/\.[ch]$/, "", $1); sub(/\.h$/, "", $2); if ($1 != $2) print $1, $2 }' \
    <<<"$includes" | sort -u)

failed=0

echo "calls and data between modules (from the object files):"
awk '{ key = $1 ".c -> " $2 ".c"; s = $3 ($4 == "call" ? "()" : "")
       if (key in list) list[key] = list[key] ", " s; else list[key] = s }
     END { for (k in list) print "  " k ": " list[k] }' <<<"$refs" | sort
echo "includes between modules (from the sources):"
awk '{ if ($1 in list) list[$1] = list[$1] ", " $2; else list[$1] = $2 }
     END { for (k in list) print "  " k " -> " list[k] }' <<<"$module_includes" | sort

# tsort's order of a graph ("a b" edges), or the cycles it found, one a line
order_or_cycles() {
    local order
    if order=$(tsort <<<"$1" 2>/dev/null); then
        # shellcheck disable=SC2086 # tsort's lines, as one
        echo $order
        return 0
    fi
    tsort <<<"$1" 2>&1 >/dev/null | awk '
        /input contains a loop/ { if (c != "") print c " -> " first; c = ""; next }
        { sub(/^tsort: /, ""); if (c == "") { c = first = $0 } else c = c " -> " $0 }
        END { if (c != "") print c " -> " first }' | sort -u | sed 's/^/    /'
    return 1
}

if order=$(order_or_cycles "$module_includes"); then
    echo "order (includes point down): $order"
else
    echo "modules.sh: the includes form a cycle:" >&2
    echo "$order" >&2
    failed=1
fi

calls=$(awk '$4 == "call" { print $1, $2 }' <<<"$refs" | sort -u)
if order=$(order_or_cycles "${calls:-x x}"); then
    [ -z "$calls" ] || echo "order (calls point down): $order"
else
    echo "modules.sh: the calls form a cycle:" >&2
    echo "$order" >&2
    failed=1
fi

# each reference needs its own #include in the C file
while read -r from to sym kind; do
    [ -n "$from" ] || continue
    if ! grep -qx "$from.c $to.h" <<<"$includes"; then
        if [ "$kind" = call ]; then what="calls $sym()"; else what="uses $sym"; fi
        echo "modules.sh: $from.c $what of $to.c without including $to.h" >&2
        failed=1
    fi
done <<<"$refs"

for o in "$@"; do
    c=${path_of[$(module_of "$o").c]}
    n=$(wc -l <"$c")
    if [ "$n" -gt "$WARN_LINES" ]; then
        echo "modules.sh: warning: $(module_of "$o").c has $n lines, more than $WARN_LINES: is it still one responsibility?" >&2
    fi
done

exit $failed
