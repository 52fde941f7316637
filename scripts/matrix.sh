#!/usr/bin/env bash
# matrix.sh -- the whole test suite on every PostgreSQL x OpenSSL cell
# (docs/compatibility.md).  Run as root; takes long the first time (it
# builds three OpenSSL series and four PostgreSQL installations into
# /var/cache/ssl_renegotiate).
#
# Runs scripts/test.sh once per cell (SSLR_CELLS=<cell>: test.sh builds,
# installs, tests and counts), keeps each run's output in
# $SSLR_MATRIX_LOGS/<cell>.log, and prints a table major x OpenSSL with
# each cell's counts, or "could not be built" with test.sh's reason, then
# the total "N passed, N failed" as the last line.  Exit status non-zero if
# anything failed.
#
# Environment: SSLR_MATRIX_CELLS (default: the six cells below),
# SSLR_MATRIX_LOGS (default: a new directory, mktemp -d
# /tmp/ssl_renegotiate-matrix.XXXXXX, kept), and whatever test.sh takes
# (each cell's test.sh run has a work directory of its own).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

sslr_require_root matrix.sh

CELLS=${SSLR_MATRIX_CELLS:-15 18 15/1.1.1 18/3.5 18/3.6 18/4.0}
if [ -n "${SSLR_MATRIX_LOGS:-}" ]; then
    LOGS=$SSLR_MATRIX_LOGS
    mkdir -p "$LOGS"
else
    LOGS=$(mktemp -d /tmp/ssl_renegotiate-matrix.XXXXXX)
fi

declare -A result     # "MAJOR SERIES" -> counts or "could not be built ..."
extras=()             # test.sh's lines that belong to no cell
majors=()
series_list=()
remember() {          # remember VALUE in the array named $2, once
    local -n list=$2
    local v
    for v in "${list[@]}"; do [ "$v" = "$1" ] && return 0; done
    list+=("$1")
}
total_passed=0
total_failed=0
for cell in $CELLS; do
    log=$LOGS/${cell//\//-openssl-}.log
    start=$SECONDS
    printf '==> cell %s: scripts/test.sh (output in %s) ... ' "$cell" "$log"
    SSLR_CELLS=$cell bash "$SSLR_REPO/scripts/test.sh" >"$log" 2>&1 || true
    # test.sh's summary: the cell's line (in cell 15 the Debian package's
    # and the Patroni cluster's follow it), then the total
    line=$(grep -E '^PostgreSQL [0-9][^ ]* (\([^)]*\) )?/ OpenSSL [^:]+: ' "$log" | tail -n 1 || true)
    for extra in 'Debian package' 'Patroni cluster'; do
        package=$(grep -E "^$extra: " "$log" | tail -n 1 || true)
        [ -z "$package" ] || extras+=("$package (in cell $cell)")
    done
    total=$(tail -n 1 "$log")
    echo "$((SECONDS - start)) s: $line"
    if [[ "$total" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        total_passed=$((total_passed + BASH_REMATCH[1]))
        total_failed=$((total_failed + BASH_REMATCH[2]))
    else
        total_failed=$((total_failed + 1))
    fi
    # "PostgreSQL 18.6 (Debian source 18.6-3) / OpenSSL 3.5.7: N passed, N failed"
    if [[ "$line" =~ ^PostgreSQL\ ([0-9]+)([^ ]*)\ (\(([^\)]*)\)\ )?/\ OpenSSL\ ([^:]+):\ (.*)$ ]]; then
        major=${BASH_REMATCH[1]}
        ossl=${BASH_REMATCH[5]}
        what="${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[4]:+ (${BASH_REMATCH[4]})}: ${BASH_REMATCH[6]}"
    else
        # test.sh stopped before its summary
        major=${cell%%/*}
        ossl=${cell#*/}
        [ "$ossl" != "$cell" ] || ossl="of the system"
        what="test.sh ended without a summary (see $log)"
    fi
    remember "$major" majors
    remember "$ossl" series_list
    result["$major $ossl"]=$what
done

# The table: one row per major, one column per OpenSSL version.
echo
header="| PostgreSQL \\ OpenSSL |"
rule="|---|"
mapfile -t series_list < <(printf '%s\n' "${series_list[@]}" | sort -V)
for s in "${series_list[@]}"; do header+=" $s |"; rule+="---|"; done
echo "$header"
echo "$rule"
for m in $(printf '%s\n' "${majors[@]}" | sort -n); do
    row="| $m |"
    for s in "${series_list[@]}"; do row+=" ${result["$m $s"]:-not run} |"; done
    echo "$row"
done
echo
[ ${#extras[@]} -eq 0 ] || printf '%s\n' "${extras[@]}" ""
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
