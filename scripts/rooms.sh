#!/usr/bin/env bash
# rooms.sh -- the calls between the extension's C files, from their object
# files, and a check that they form no cycle (README, "Layout").
#
#   scripts/rooms.sh accounting.o ending.o ...
#
# Prints one line "caller.c -> callee.c: function, ..." per pair of files,
# then the files in an order where every call points down; exits non-zero
# if the calls form a cycle.  Only functions count (nm type T): the
# connection state and the thresholds are data, defined in policy.c.
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: $0 OBJECT..." >&2; exit 2; }

edges=$(
    for o in "$@"; do
        nm --defined-only "$o" | awk -v f="${o%.o}.c" '$2 == "T" { print "D", $3, f }'
    done
    for o in "$@"; do
        nm --undefined-only "$o" | awk -v f="${o%.o}.c" '{ print "U", $2, f }'
    done
)
graph=$(awk '
    $1 == "D" { def[$2] = $3; next }
    $1 == "U" && ($2 in def) && def[$2] != $3 {
        key = $3 " -> " def[$2]
        if (key in calls)
            calls[key] = calls[key] ", " $2
        else
            calls[key] = $2
    }
    END { for (k in calls) print k ": " calls[k] }
' <<<"$edges" | sort)

echo "$graph"
order=$(awk '{ print $1, $3 }' <<<"${graph//:/ }" | tsort 2>&1) || {
    echo "rooms.sh: the calls between the C files form a cycle:" >&2
    echo "$order" >&2
    exit 1
}
echo "order (calls point down): $(echo $order)"
