# shellcheck shell=bash
# bench/run/runs.sh -- the benchmark's runs, sourced by bench/run.sh after
# bench/run/setup.sh: what each configuration connects with, one timed psql
# session (run_copy) or pgbench run (run_pgbench) as one CSV row of $CSV,
# the untimed verification pass (GOOD_CONFIGS: the configurations whose
# data came through intact), then the rounds (ROUNDS_DONE of them), the
# order of the jobs rotated from round to round.

# ---------------------------------------------------------- configurations
CLK_TCK=$(getconf CLK_TCK)
# COPY sessions: psql on one CPU, its backend on another.  Left to the
# scheduler, the two sometimes share a CPU for a while, and on this kind of
# VM a context switch is dear: the same COPY then takes ~1.5x the CPU time.
PIN='' CLIENT_PIN='' BACKEND_CPU=''
if [ "${SSLR_BENCH_PIN:-1}" != 0 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
    PIN=1 BACKEND_CPU=1 CLIENT_PIN="taskset -c 0"
fi
# busy CPU of the whole machine, in USER_HZ ticks (user nice system irq softirq steal)
BUSY_TICKS="awk '/^cpu /{ print \$2 + \$3 + \$4 + \$7 + \$8 + \$9 }' /proc/stat"
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
TLS13="sslmode=require ssl_min_protocol_version=TLSv1.3 gssencmode=disable"
TLS12="sslmode=require ssl_max_protocol_version=TLSv1.2 gssencmode=disable"
# 2003's pace: a new key at every limit, however fast they come
# (ssl_renegotiate.debug_min_rekey_gap = 0, a developer's setting); (p) is
# 64kB at the default pace, a new key at most once per min_rekey_gap.
PACE03="-c ssl_renegotiate.debug_min_rekey_gap=0"
conn_of() { # config -> conninfo
    case $1 in
        a) echo "$UNIX_A" ;;
        b) echo "host=127.0.0.1 port=$PA dbname=postgres sslmode=disable gssencmode=disable" ;;
        c) echo "host=127.0.0.1 port=$PA dbname=postgres $TLS13" ;;
        d) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=0'" ;;
        e) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=64kB $PACE03'" ;;
        p) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=64kB'" ;;
        f) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=640kB $PACE03'" ;;
        g) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS13 options='-c ssl_renegotiate.byte_limit=512MB'" ;;
        h64) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS12 options='-c ssl_renegotiate.byte_limit=64kB -c ssl_renegotiate.tls12=renegotiate $PACE03'" ;;
        h1M) echo "host=127.0.0.1 port=$PB dbname=postgres $TLS12 options='-c ssl_renegotiate.byte_limit=1MB -c ssl_renegotiate.tls12=renegotiate $PACE03'" ;;
    esac
}
label_of() {
    case $1 in
        a) echo "(a) Unix socket" ;;
        b) echo "(b) TCP, no TLS" ;;
        c) echo "(c) TLS 1.3, no extension" ;;
        d) echo "(d) TLS 1.3, ext, byte_limit 0" ;;
        e) echo "(e) TLS 1.3, ext, 64kB" ;;
        p) echo "(p) TLS 1.3, ext, 64kB, paced" ;;
        f) echo "(f) TLS 1.3, ext, 640kB" ;;
        g) echo "(g) TLS 1.3, ext, 512MB" ;;
        h64) echo "(h) TLS 1.2, reneg, 64kB" ;;
        h1M) echo "(h) TLS 1.2, reneg, 1MB" ;;
        pgS) echo "pgbench -S" ;;
        pgC) echo "pgbench -C -S" ;;
    esac
}
on_b() { case $1 in d | e | p | f | g | h64 | h1M) return 0 ;; *) return 1 ;; esac; }

# One psql session: an untimed preamble, CPU counters of psql and the
# backend, the timed \copy, CPU counters again, then what the extension
# counted for this connection.  Lines are tagged for the parser.
# schedstat field 1 = nanoseconds on a CPU (user + system).
session_script() { # config direction target
    local cfg=$1 dir=$2 target=$3
    if [ -n "$PIN" ]; then
        echo "SELECT pg_backend_pid() AS sslr_bench_pid \\gset"
        echo "\\setenv SSLR_BENCH_BPID :sslr_bench_pid"
        echo "\\! taskset -pc $BACKEND_CPU \$SSLR_BENCH_BPID >/dev/null"
    fi
    if [ "$dir" = from ]; then
        echo "TRUNCATE t2;"
        echo "CHECKPOINT;"
    fi
    echo "SELECT 'B0 ' || split_part(pg_read_file('/proc/self/schedstat'), ' ', 1);"
    echo "\\! echo \"C0 \$(cut -d' ' -f1 /proc/\$PPID/schedstat)\"; echo \"M0 \$($BUSY_TICKS)\""
    echo "\\timing on"
    if [ "$dir" = to ]; then
        echo "\\copy t to '$target'"
    else
        echo "\\copy t2 from '$target'"
    fi
    echo "\\timing off"
    echo "SELECT 'B1 ' || split_part(pg_read_file('/proc/self/schedstat'), ' ', 1);"
    echo "\\! echo \"C1 \$(cut -d' ' -f1 /proc/\$PPID/schedstat)\"; echo \"M1 \$($BUSY_TICKS)\""
    case $cfg in
        a) echo "SELECT 'S none none';" ;;
        *) echo "SELECT 'S ' || coalesce(version, 'none') || ' ' || coalesce(cipher, 'none') FROM pg_stat_ssl WHERE pid = pg_backend_pid();" ;;
    esac
    if on_b "$cfg"; then
        echo "SELECT 'R ' || concat_ws(' ', rekeys_sent, rekeys_received, round(rekey_time::numeric, 3), bytes_sent, bytes_received, rekey_failures, current_setting('ssl_renegotiate.byte_limit')) FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();"
    fi
}

CSV=$T/samples.csv
echo "round,job,config,direction,elapsed_ms,mib_per_s,tps,client_cpu_ms,backend_cpu_ms,rekeys_sent,rekeys_received,rekey_time_ms,tls_bytes_sent,tls_bytes_received,tls_version,cipher,other_cpu_ms,error" >"$CSV"

# A failed run is recorded (error column) and the benchmark goes on.
fail_row() { # round job config direction message
    local msg
    msg=$(printf '%s' "$5" | tr ',\n\r' ';  ' | cut -c1-160)
    echo "$1,$2,$3,$4,,,,,,,,,,,,,,$msg" >>"$CSV"
    log "  $2 (round $1) FAILED: $msg"
}

# run_copy round config direction target -> appends a CSV row; 1 on failure
run_copy() {
    local round=$1 cfg=$2 dir=$3 target=$4 o=$T/session.out
    session_script "$cfg" "$dir" "$target" >"$T/session.sql"
    if ! $CLIENT_PIN psql -X -At -v ON_ERROR_STOP=1 -P pager=off -d "$(conn_of "$cfg")" \
        -f "$T/session.sql" >"$o" 2>"$T/session.err"; then
        fail_row "$round" "${cfg}_$dir" "$cfg" "$dir" \
            "$(grep -v '^psql:.*connection to server was lost' "$T/session.err" | head -n 2 | sed 's/^psql:[^:]*:[0-9]*: //')"
        return 1
    fi
    perl -e '
        my ($round, $cfg, $dir, $bytes, $hz) = @ARGV;
        my %v; my ($ms, $rk, $s);
        while (<STDIN>) {
            chomp;
            if (/^(B0|B1|C0|C1|M0|M1) (\d+)$/) { $v{$1} = $2 }
            elsif (/^Time: ([\d.]+) ms/) { $ms = $1 }
            elsif (/^S (\S+) (\S+)$/) { $s = "$1,$2" }
            elsif (/^R (.*)$/) { $rk = [split / /, $1] }
        }
        for (qw(B0 B1 C0 C1)) { die "missing $_\n" unless defined $v{$_} }
        die "missing Time\n" unless defined $ms;
        die "missing S\n" unless defined $s;
        my @r = $rk ? @$rk[0..4] : ("", "", "", "", "");
        my ($cc, $bc) = (($v{C1} - $v{C0}) / 1e6, ($v{B1} - $v{B0}) / 1e6);
        # CPU used by every other process meanwhile (USER_HZ ticks of /proc/stat)
        my $other = defined $v{M1} && defined $v{M0} ? sprintf("%.0f", ($v{M1} - $v{M0}) * 1000 / $hz - $cc - $bc) : "";
        printf "%s,%s_%s,%s,%s,%.3f,%.2f,,%.1f,%.1f,%s,%s,%s,\n", $round, $cfg, $dir, $cfg, $dir, $ms,
            $bytes / 1048576 / ($ms / 1000), $cc, $bc, join(",", @r), $s, $other;
    ' "$round" "$cfg" "$dir" "$BYTES" "$CLK_TCK" <"$o" >>"$CSV" || { cat "$o" >&2; die "config $cfg, COPY $dir: cannot parse psql output"; }
}

# postmaster's CPU of exited children (ticks)
children_ticks() { awk '{ print $16 + $17 }' "/proc/$1/stat"; }

run_pgbench() { # round job (pgS|pgC) config (c|d)
    local round=$1 job=$2 cfg=$3 port pm opts=() t0 t1 m0 m1 tps
    if [ "$cfg" = c ]; then port=$PA pm=$PM_A; else port=$PB pm=$PM_B; fi
    [ "$job" = pgC ] && opts=(-C)
    t0=$(children_ticks "$pm")
    m0=$(busy_ticks)
    if ! env PGHOST=127.0.0.1 PGPORT="$port" PGSSLMODE=require PGSSLMINPROTOCOLVERSION=TLSv1.3 \
        PGGSSENCMODE=disable PGOPTIONS="$([ "$cfg" = d ] && echo '-c ssl_renegotiate.byte_limit=0')" \
        /usr/bin/time -f 'RUSAGE %U %S' -o "$T/pgbench.time" \
        pgbench -n -S "${opts[@]}" -c "$PGB_CLIENTS" -j "$PGB_CLIENTS" -T "$PGB_SECONDS" postgres \
        >"$T/pgbench.out" 2>&1; then
        fail_row "$round" "${job}_$cfg" "$cfg" "$job" "$(grep -m 2 -i 'error\|fatal' "$T/pgbench.out")"
        return 1
    fi
    # the postmaster reaps the backends just after they exit
    sleep 0.3
    t1=$(children_ticks "$pm")
    m1=$(busy_ticks)
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$T/pgbench.out" | head -n 1)
    [ -n "$tps" ] || { fail_row "$round" "${job}_$cfg" "$cfg" "$job" "no tps in pgbench output"; return 1; }
    awk -v r="$round" -v job="$job" -v cfg="$cfg" -v tps="$tps" -v s="$PGB_SECONDS" \
        -v bt=$((t1 - t0)) -v mt=$((m1 - m0)) -v hz="$CLK_TCK" '
        /^RUSAGE/ {
            c = ($2 + $3) * 1000; b = bt * 1000 / hz
            printf "%s,%s_%s,%s,%s,%.3f,,%s,%.1f,%.1f,,,,,,TLSv1.3,,%.0f,\n", r, job, cfg, cfg, job, s * 1000, tps, c, b, mt * 1000 / hz - c - b
        }
    ' "$T/pgbench.time" >>"$CSV"
}

# ------------------------------------------------------ verification pass
log "verification pass (untimed): every COPY configuration once, output checked against the file"
# A configuration that fails here is left out of the rounds (and reported).
GOOD_CONFIGS=
for cfg in $CONFIGS; do
    ok=1
    if run_copy 0 "$cfg" to "$T/out.copy"; then
        got=$(md5sum <"$T/out.copy" | cut -d' ' -f1)
        if [ "$got" != "$REF_MD5" ]; then
            fail_row 0 "${cfg}_to" "$cfg" to "DATA MISMATCH: COPY TO output md5 $got"
            ok=
        fi
    else
        ok=
    fi
    rm -f "$T/out.copy"
    if run_copy 0 "$cfg" from "$DATA"; then
        if on_b "$cfg"; then u=$UNIX_B; else u=$UNIX_A; fi
        got=$(psql -X -q -d "$u" -c '\copy t2 to stdout' | md5sum | cut -d' ' -f1)
        if [ "$got" != "$REF_MD5" ]; then
            fail_row 0 "${cfg}_from" "$cfg" from "DATA MISMATCH: t2 after COPY FROM md5 $got"
            ok=
        fi
    else
        ok=
    fi
    if [ -n "$ok" ]; then
        GOOD_CONFIGS="$GOOD_CONFIGS $cfg"
        log "  $(label_of "$cfg"): COPY TO and COPY FROM data identical (md5 $got)"
    else
        [ "$cfg" != c ] || die "the baseline (c) failed its verification run"
        log "  $(label_of "$cfg"): FAILED, left out of the timed rounds"
    fi
done

# ----------------------------------------------------------------- rounds
JOBS=()
for cfg in $GOOD_CONFIGS; do JOBS+=("copy:$cfg:to" "copy:$cfg:from"); done
if [ -z "${SSLR_BENCH_NO_PGBENCH:-}" ]; then
    JOBS+=("pgS:c" "pgS:d" "pgC:c" "pgC:d")
fi
NJOBS=${#JOBS[@]}
ROUNDS_DONE=0
ROUNDS_START=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
    rstart=$(date +%s)
    # stop early rather than overrun the time budget (one more round would)
    if [ "$r" -gt 1 ]; then
        per_round=$(( (rstart - ROUNDS_START) / (r - 1) ))
        if [ $(( rstart - BENCH_START + per_round + 15 )) -gt "$BUDGET" ]; then
            log "time budget: another round (~${per_round} s) would pass SSLR_BENCH_BUDGET=$BUDGET s; stopping after $((r - 1)) rounds"
            break
        fi
    fi
    # rotate the order: round r starts (r-1) * step jobs further on
    step=$(( (NJOBS + ROUNDS - 1) / ROUNDS ))
    [ "$step" -ge 1 ] || step=1
    off=$(( ((r - 1) * step) % NJOBS ))
    for ((k = 0; k < NJOBS; k++)); do
        job=${JOBS[$(( (off + k) % NJOBS ))]}
        IFS=: read -r kind cfg dir <<<"$job"
        case $kind in
            copy)
                if [ "$dir" = to ]; then
                    run_copy "$r" "$cfg" to /dev/null || true
                else
                    run_copy "$r" "$cfg" from "$DATA" || true
                fi ;;
            pgS | pgC) run_pgbench "$r" "$kind" "$cfg" || true ;;
        esac
    done
    # shellcheck disable=SC2034 # read by bench/run/plot.sh and tables.sh
    ROUNDS_DONE=$r
    log "round $r/$ROUNDS done in $(( $(date +%s) - rstart )) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
done
