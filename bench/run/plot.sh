# shellcheck shell=bash
# bench/run/plot.sh -- the benchmark's plot, sourced by bench/run.sh after
# bench/run/tables.sh: $OUT/plot.png (gnuplot, if installed) from $CSV.plot;
# then the table on stdout.

# ------------------------------------------------------------------- plot
PLOTDATA=$CSV.plot
if command -v gnuplot >/dev/null 2>&1; then
    line() { awk -v k="line_$1" -v col="$2" '$1 == k { print $col }' "$PLOTDATA"; }
    B_TO=$(line b 4) B_FROM=$(line b 5) C_TO=$(line c 4) C_FROM=$(line c 5)
    grep '^tls13' "$PLOTDATA" | sort -k2n >"$T/tls13.dat" || true
    grep '^tls12' "$PLOTDATA" | sort -k2n >"$T/tls12.dat" || true
    term="pngcairo size 1000,680 font 'sans,10'"
    gnuplot -e "set terminal $term" >/dev/null 2>&1 || term="png size 1000,680"
    {
        echo "set terminal $term"
        echo "set output '$OUT/plot.png'"
        echo "set termoption noenhanced"
        echo "set title \"ssl_renegotiate: COPY throughput against ssl_renegotiate.byte_limit ($DATA_MB MiB of COPY text, $(nproc) CPUs)\\npoints: median of $ROUNDS_DONE rounds, bars: min-max; horizontal lines: medians of (b) TCP without TLS and (c) TLS 1.3 without the extension\""
        echo "set xlabel 'ssl_renegotiate.byte_limit (bytes under one key, each direction); TLS 1.2: renegotiation at 64kB and 1MB'"
        echo "set ylabel 'MiB/s of COPY text'"
        echo "set xrange [0.5:5.5]"
        echo "set yrange [0:*]"
        echo "set offsets 0, 0, graph 0.08, 0"
        echo "set xtics ('64kB' 1, '640kB' 2, '1MB' 3, '512MB' 4, 'off (0)' 5)"
        echo "set key outside bottom center horizontal maxrows 2"
        echo "set grid ytics"
        echo "set style line 1 lc rgb '#1f77b4' lw 2 pt 7 ps 1.3"
        echo "set style line 2 lc rgb '#d62728' lw 2 pt 5 ps 1.3"
        echo "set style line 3 lc rgb '#1f77b4' lw 2 pt 6 ps 1.3 dt 2"
        echo "set style line 4 lc rgb '#d62728' lw 2 pt 4 ps 1.3 dt 2"
        p="plot"
        # TLS 1.2 points a little to the right so that the bars don't overlap
        [ -s "$T/tls13.dat" ] && p="$p '$T/tls13.dat' using 2:4:5:6 with yerrorlines ls 1 title 'TLS 1.3, COPY TO',"
        [ -s "$T/tls13.dat" ] && p="$p '$T/tls13.dat' using 2:7:8:9 with yerrorlines ls 2 title 'TLS 1.3, COPY FROM',"
        [ -s "$T/tls12.dat" ] && p="$p '$T/tls12.dat' using (\$2+0.08):4:5:6 with yerrorlines ls 3 title 'TLS 1.2 renegotiation, COPY TO',"
        [ -s "$T/tls12.dat" ] && p="$p '$T/tls12.dat' using (\$2+0.08):7:8:9 with yerrorlines ls 4 title 'TLS 1.2 renegotiation, COPY FROM',"
        [ -n "$B_TO" ] && p="$p $B_TO with lines lc rgb '#1f77b4' dt 3 lw 1.5 title '(b) no TLS, COPY TO',"
        [ -n "$B_FROM" ] && p="$p $B_FROM with lines lc rgb '#d62728' dt 3 lw 1.5 title '(b) no TLS, COPY FROM',"
        [ -n "$C_TO" ] && p="$p $C_TO with lines lc rgb '#1f77b4' dt 4 lw 1.5 title '(c) TLS 1.3 stock, COPY TO',"
        [ -n "$C_FROM" ] && p="$p $C_FROM with lines lc rgb '#d62728' dt 4 lw 1.5 title '(c) TLS 1.3 stock, COPY FROM',"
        echo "${p%,}"
    } >"$T/plot.gp"
    if gnuplot "$T/plot.gp" 2>"$T/gnuplot.err"; then
        log "plot: $OUT/plot.png"
    else
        cat "$T/gnuplot.err" >&2
        log "gnuplot failed; no plot"
    fi
else
    log "gnuplot not installed; no plot"
fi

cat "$RESULT"
log "results: $RESULT, $OUT/$STAMP.csv"
