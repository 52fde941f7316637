# shellcheck shell=bash
# bench/run/tables.sh -- the benchmark's tables, sourced by bench/run.sh
# after bench/run/runs.sh: $RESULT ($OUT/<date>.txt) with the machine, the
# software and the data, then, from the samples in $CSV, the medians and
# ratios to (c) per configuration, the CPU cost of one rotation and the
# targets; also $CSV.plot, the points bench/run/plot.sh draws.

# ---------------------------------------------------------------- report
STAMP=$(date +%Y-%m-%d_%H%M)
RESULT=$OUT/$STAMP.txt
cp "$CSV" "$OUT/$STAMP.csv"

{
    echo "ssl_renegotiate benchmark, $(date '+%Y-%m-%d %H:%M %Z')"
    echo "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, kernel $(uname -r)"
    echo "software: PostgreSQL $PG_VERSION, $(openssl version), extension at ${SSLR_BENCH_REV:-unknown}"
    echo "data: $BYTES bytes of COPY text ($DATA_MB MiB, $ROWS rows, table $TABLE_SIZE); rounds: $ROUNDS_DONE of $ROUNDS; pgbench: -c $PGB_CLIENTS -j $PGB_CLIENTS -T $PGB_SECONDS, scale $PGB_SCALE"
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); total time $(( $(date +%s) - BENCH_START )) s; $([ -n "$PIN" ] && echo "COPY sessions pinned: psql on CPU 0, backend on CPU $BACKEND_CPU" || echo "no CPU pinning")"
    echo
} >"$RESULT"

perl - "$CSV" "$CONFIGS" >>"$RESULT" <<'PERL'
use strict; use warnings;
my ($csv, $configs) = @ARGV;
my @configs = split ' ', $configs;
open my $fh, '<', $csv or die;
my $hdr = <$fh>; chomp $hdr; my @h = split /,/, $hdr;
my (%s, %fail);                # $s{job}{round} = row hash; $fail{job} = [messages]
while (<$fh>) {
    chomp; my @f = split /,/, $_, -1; my %r; @r{@h} = @f;
    if ($r{error} ne "") { push @{$fail{$r{job}}}, "round $r{round}: $r{error}"; next }
    next if $r{round} == 0;     # verification pass
    $s{$r{job}}{$r{round}} = \%r;
}
sub failnote { my ($job) = @_; return '' unless $fail{$job};
    my $n = @{$fail{$job}}; return "  ** $n run(s) FAILED, first: $fail{$job}[0]" }
sub med { my @x = sort { $a <=> $b } @_; return undef unless @x; my $n = @x;
          return $n % 2 ? $x[$n/2] : ($x[$n/2-1] + $x[$n/2]) / 2 }
sub mm { my @x = sort { $a <=> $b } @_; return ($x[0], $x[-1]) }
sub fmt { my ($p, @x) = @_; return "-" unless @x; my ($lo, $hi) = mm(@x);
          return sprintf("%.${p}f [%.${p}f-%.${p}f]", med(@x), $lo, $hi) }
my %label = (a => '(a) Unix socket', b => '(b) TCP, no TLS', c => '(c) TLS 1.3, no extension',
    d => '(d) TLS 1.3, ext, byte_limit 0', e => '(e) TLS 1.3, ext, byte_limit 64kB', p => '(p) TLS 1.3, ext, 64kB, min_rekey_gap 1s',
    f => '(f) TLS 1.3, ext, byte_limit 640kB', g => '(g) TLS 1.3, ext, byte_limit 512MB',
    h64 => '(h) TLS 1.2, renegotiate, 64kB', h1M => '(h) TLS 1.2, renegotiate, 1MB');
# ratio of job's metric to the baseline job's, round by round
sub ratios { my ($job, $base, $key) = @_; my @r;
    for my $rd (sort { $a <=> $b } keys %{$s{$job} || {}}) {
        next unless $s{$base}{$rd} && $s{$base}{$rd}{$key} > 0;
        push @r, $s{$job}{$rd}{$key} / $s{$base}{$rd}{$key} }
    return @r }
sub col { my ($job, $key) = @_; return map { $_->{$key} } grep { defined $_->{$key} && $_->{$key} ne '' } values %{$s{$job} || {}} }
# best of the rounds against the best of (c): robust to a round that a
# neighbour's load slowed down, which the same-round ratio is not
sub best { my ($job, $base, $key) = @_; my @x = sort { $b <=> $a } col($job, $key); my @y = sort { $b <=> $a } col($base, $key);
    return (@x && @y && $y[0] > 0) ? $x[0] / $y[0] : undef }
my (%medratio, %bestratio);
for my $dir (qw(to from)) {
    printf "COPY %s: %s (MiB/s of COPY text; median [min-max] over rounds; ratio = same round's (c))\n",
        $dir eq 'to' ? 'TO (server -> psql, to /dev/null)' : 'FROM (psql -> server, into t2)', '';
    printf "%-32s %-24s %-22s %-6s %-19s %-19s %-12s %-14s %s\n", 'configuration', 'MiB/s', 'ratio to (c)', 'best',
        'psql CPU s', 'backend CPU s', 'rekeys s/r', 'rekey_time ms', 'others CPU s';
    for my $c (@configs) {
        my $job = "${c}_$dir";
        unless ($s{$job}) {
            printf "%-32s %s\n", $label{$c}, failnote($job) || 'not run' if $fail{$job};
            next;
        }
        my @ratio = ratios($job, "c_$dir", 'mib_per_s');
        $medratio{$job} = med(@ratio);
        $bestratio{$job} = best($job, "c_$dir", 'mib_per_s');
        my @rs = col($job, 'rekeys_sent'); my @rr = col($job, 'rekeys_received'); my @rt = col($job, 'rekey_time_ms');
        printf "%-32s %-24s %-22s %-6s %-19s %-19s %-12s %-14s %s\n", $label{$c}, fmt(1, col($job, 'mib_per_s')),
            fmt(3, @ratio), sprintf("%.3f", $bestratio{$job}), fmt(2, map { $_ / 1000 } col($job, 'client_cpu_ms')),
            fmt(2, map { $_ / 1000 } col($job, 'backend_cpu_ms')),
            @rs ? sprintf("%d/%d", med(@rs), med(@rr)) : '-', @rt ? sprintf("%.1f", med(@rt)) : '-',
            fmt(2, map { $_ / 1000 } col($job, 'other_cpu_ms'));
        print failnote($job), "\n" if $fail{$job};
    }
    print "\n";
}
if ($s{pgS_c}) {
    print "pgbench over TLS 1.3 (median [min-max] over rounds; ratio = same round's (c))\n";
    printf "%-32s %-24s %-22s %-6s %-19s %-21s %s\n", 'run', 'tps', 'ratio to (c)', 'best', 'client CPU s', 'backends CPU s', 'others CPU s';
    for my $j (qw(pgS pgC)) {
        for my $c (qw(c d)) {
            my $job = "${j}_$c";
            print "$job", failnote($job), "\n" if $fail{$job};
            next unless $s{$job};
            my @ratio = ratios($job, "${j}_c", 'tps');
            $medratio{$job} = med(@ratio);
            $bestratio{$job} = best($job, "${j}_c", 'tps');
            printf "%-32s %-24s %-22s %-6s %-19s %-21s %s\n",
                ($j eq 'pgS' ? 'pgbench -S' : 'pgbench -C -S') . ($c eq 'c' ? ', (c) no extension' : ', (d) ext, byte_limit 0'),
                fmt(0, col($job, 'tps')), fmt(3, @ratio), sprintf("%.3f", $bestratio{$job}),
                fmt(2, map { $_ / 1000 } col($job, 'client_cpu_ms')), fmt(2, map { $_ / 1000 } col($job, 'backend_cpu_ms')),
                fmt(2, map { $_ / 1000 } col($job, 'other_cpu_ms'));
        }
    }
    print "\n";
}
# cost of one rekey: CPU difference to a reference configuration in the same
# round, divided by the rekeys of the configuration (both sides summed)
print "CPU cost of key rotation: median over rounds of (CPU(x) - CPU(ref)) / (rekeys(x) - rekeys(ref)) in us,\n";
print "per rekey (rekeys_sent + rekeys_received) and per event (max of the two: a KeyUpdate, a requested KeyUpdate\n";
print "and its answer, or one TLS 1.2 renegotiation, which rotates both directions); rekey_time = server-measured\n";
printf "%-50s %8s %7s %-19s %-19s %s\n", 'configuration vs reference, COPY direction', 'rekeys', 'events',
    'backend us/rk /ev', 'psql us/rk /ev', 'rekey_time us/sent';
my %short = (d => '(d) TLS 1.3 byte_limit 0', e => '(e) TLS 1.3 64kB', p => '(p) TLS 1.3 64kB paced', f => '(f) TLS 1.3 640kB',
    h64 => '(h) TLS 1.2 64kB', h1M => '(h) TLS 1.2 1MB');
for my $p (['e', 'd'], ['f', 'd'], ['h64', 'h1M']) {
    my ($x, $ref) = @$p;
    for my $dir (qw(to from)) {
        my ($jx, $jr) = ("${x}_$dir", "${ref}_$dir");
        next unless $s{$jx} && $s{$jr};
        my (@b, @cl, @n, @ev, @be, @ce, @rt);
        for my $rd (keys %{$s{$jx}}) {
            my ($X, $R) = ($s{$jx}{$rd}, $s{$jr}{$rd}); next unless $R;
            my $k = ($X->{rekeys_sent} + $X->{rekeys_received}) - (($R->{rekeys_sent} || 0) + ($R->{rekeys_received} || 0));
            my $mx = sub { my $h = shift; my ($a, $b) = ($h->{rekeys_sent} || 0, $h->{rekeys_received} || 0); $a > $b ? $a : $b };
            my $e = $mx->($X) - $mx->($R);
            next unless $k > 0 && $e > 0;
            push @n, $k; push @ev, $e;
            my ($db, $dc) = (($X->{backend_cpu_ms} - $R->{backend_cpu_ms}) * 1000, ($X->{client_cpu_ms} - $R->{client_cpu_ms}) * 1000);
            push @b, $db / $k; push @cl, $dc / $k; push @be, $db / $e; push @ce, $dc / $e;
            push @rt, $X->{rekey_time_ms} * 1000 / $X->{rekeys_sent} if $X->{rekeys_sent} > 0;
        }
        next unless @n;
        # a handful of rotations drowns in the noise of the CPU figures
        my $few = med(@ev) < 20;
        printf "%-50s %8d %7d %-19s %-19s %s\n", "$short{$x} vs $short{$ref}, COPY \U$dir", med(@n), med(@ev),
            $few ? '(too few)' : sprintf("%.0f / %.0f", med(@b), med(@be)),
            $few ? '(too few)' : sprintf("%.0f / %.0f", med(@cl), med(@ce)),
            @rt ? sprintf("%.0f", med(@rt)) : '-';
    }
}
print "\n";
print "Targets: judged on the median of the same-round ratios to (c); 'best' = best round of x / best round of (c)\n";
sub target { my ($what, $job, $min) = @_; my $v = $medratio{$job}; my $b = $bestratio{$job};
    printf "  %-52s %s  (best %s)  %s\n", $what, defined $v ? sprintf("%.3f", $v) : '  -  ',
        defined $b ? sprintf("%.3f", $b) : '  -  ',
        !defined $v ? ($fail{$job} ? 'FAILED' : 'not run') :
        $min ? ($v >= $min ? "met (>= $min)" : "MISSED (< $min)") : 'reported' }
target('(d) accounting only, COPY TO', 'd_to', 0.99);
target('(d) accounting only, COPY FROM', 'd_from', 0.99);
target('(d) accounting only, pgbench -S tps', 'pgS_d', 0.99);
target('(d) accounting only, pgbench -C -S tps', 'pgC_d', 0.98);
target('(e) TLS 1.3 KeyUpdate every 64kB, COPY TO', 'e_to', 0.95);
target('(e) TLS 1.3 KeyUpdate every 64kB, COPY FROM', 'e_from', 0.95);
target('(h) TLS 1.2 renegotiation every 64kB, COPY TO', 'h64_to', 0);
target('(h) TLS 1.2 renegotiation every 64kB, COPY FROM', 'h64_from', 0);
print "\n";
# the plot's data: x position, label, TO, FROM (TLS 1.3 series), and TLS 1.2
open my $pd, '>', "$csv.plot" or die;
my @pts = (['e', 1, '64kB'], ['f', 2, '640kB'], ['h1M', 3, '1MB'], ['g', 4, '512MB'], ['d', 5, 'off (0)']);
# columns: series x label, then median min max of COPY TO, and of COPY FROM
sub mmm { my @x = col($_[0], 'mib_per_s'); return (0, 0, 0) unless @x; my ($lo, $hi) = mm(@x); return (med(@x), $lo, $hi) }
push @pts, ['h64', 1, '64kB'];
for my $p (@pts) {
    my ($c, $x, $l) = @$p;
    next unless $s{"${c}_to"} && $s{"${c}_from"};
    printf $pd "%s %d \"%s\" %.2f %.2f %.2f %.2f %.2f %.2f\n", ($c =~ /^h/ ? 'tls12' : 'tls13'), $x, $l,
        mmm("${c}_to"), mmm("${c}_from");
}
for my $c (qw(b c)) {
    printf $pd "line_%s 0 \"\" %.2f %.2f\n", $c, med(col("${c}_to", 'mib_per_s')), med(col("${c}_from", 'mib_per_s')) if $s{"${c}_to"};
}
close $pd;
PERL

{
    echo "Notes: MiB = 2^20 bytes of COPY text; elapsed time is psql's \\timing of the \\copy alone (no connection set-up)."
    echo "CPU: psql and its backend from /proc/PID/schedstat around the \\copy; pgbench client from getrusage,"
    echo "backends from the postmaster's cutime+cstime. COPY FROM runs after an untimed TRUNCATE t2 + CHECKPOINT."
    echo "others CPU: what every other process of the machine used meanwhile (/proc/stat busy time minus ours; for"
    echo "pgbench it includes the postmaster's forks): a sample with a lot of it was slowed down by a neighbour."
    echo "Data checked once per configuration (untimed pass): md5 of COPY TO output and of t2 after COPY FROM = $REF_MD5."
    echo "Raw samples: $STAMP.csv (round 0 = the verification pass, not in the table)."
} >>"$RESULT"
