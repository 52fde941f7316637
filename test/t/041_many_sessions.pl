
# Many concurrent TLS sessions: SSLR_MANY_SESSIONS (default 300) pgbench
# clients over TLS 1.3 that rekey all the time (ssl_renegotiate.byte_limit =
# 1kB, tiny messages), plus two sessions copying 20 MB each way at 64kB.
# While they run, the view is sampled from a Unix-socket connection and
# compared, in the same query, with pg_stat_ssl / pg_stat_activity.
#
# The pgbench clients run a script equivalent to -S with a "gate" in front
# (a shared advisory lock that the test holds exclusively while it wants
# them frozen).  That makes the interesting phases independent of timing:
#   1. frozen: every client connected and blocked at the gate, so the set
#      of TLS backends cannot change: the view must equal pg_stat_ssl
#      exactly (same pids, version, cipher, user);
#   2. running: the gate is open; the clients run SSLR_MANY_TX
#      transactions each (-t, so they all stay connected until they are
#      done) while both COPYs run; every sample is checked, exactly
#      whenever pg_stat_ssl still shows every session;
#   3. after: only the two COPY sessions are left.
# Also measured (note()): the time to read the view with that many rows,
# and the shared memory of the extension, compared with a second node with
# max_connections = 100 (per-slot size and linearity asserted).
#
# Environment: SSLR_MANY_SESSIONS (default 300; bench/reliability.sh: 500),
# SSLR_MANY_TX (transactions per client, default 20).

use strict;
use warnings FATAL => 'all';

use Config;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SslrTest;

my $N = $ENV{SSLR_MANY_SESSIONS} // 300;
my $TX = $ENV{SSLR_MANY_TX} // 20;
die "SSLR_MANY_SESSIONS must be a number >= 4"
  unless $N =~ /^\d+$/ && $N >= 4;
die "SSLR_MANY_TX must be a number >= 1" unless $TX =~ /^\d+$/ && $TX >= 1;
my $max_connections = $N + 50 > 1000 ? $N + 50 : 1000;
my $GATE = 4141;                                         # advisory lock key
my $COPY_ROWS = $ENV{SSLR_MANY_COPY_ROWS} // 200_000;    # ~20 MB

my $node = new_tls_node('many', conf => <<"EOC");
max_connections = $max_connections
shared_buffers = 16MB
log_statement = none
autovacuum = off
EOC
my $log_start = -s $node->logfile
  // 0;    # the log may exist from an earlier run
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

# ------------------------------------------------------------- test data
my $dir = PostgreSQL::Test::Utils::tempdir('many');
$node->command_ok([ 'pgbench', '-i', '-q', '-s', '1', 'postgres' ],
	'pgbench -i -s 1');

# about 20 MB of COPY text, written to a file by the server
my $src_file = "$dir/src.copy";
$node->safe_psql(
	'postgres', qq{
	CREATE TABLE src AS
	  SELECT i, md5(i::text) AS h, repeat(chr(97 + i % 26), 40 + i % 31) AS s,
	         now() - i * interval '1 second' AS ts
	  FROM generate_series(1, $COPY_ROWS) i;
	CREATE TABLE dst (LIKE src);
	COPY src TO '$src_file';
});
my $src_md5 = file_md5($src_file);
my $src_size = -s $src_file;
note sprintf('COPY data: %d rows, %.1f MB, md5 %s',
	$COPY_ROWS, $src_size / 1e6, $src_md5);

# order-independent content hash of a table
my $HASH = q{SELECT count(*) || ':' ||
  coalesce(sum(('x' || substr(md5(x::text), 1, 15))::bit(60)::bigint), 0) FROM };
my $src_hash = $node->safe_psql('postgres', "$HASH src x");

# ------------------------------------------------------------ the sampler
# A Unix-socket session that holds the gate and samples.
my $mon = $node->background_psql('postgres');
$mon->set_query_timer_restart;    # a timeout per query, not per session
$mon->query_safe("SELECT pg_advisory_lock($GATE)");

# One query compares the view with pg_stat_ssl.  The view is read first
# (CTE a, materialized), and pg_stat_get_activity(), behind pg_stat_ssl
# and pg_stat_activity, only after it: its argument depends on a's row
# count, so the function is called after a has been read.  With that
# order, a backend that has a pg_stat_ssl row also had its slot attached
# when the view was read, unless it was already exiting (a backend
# attaches its slot in authentication, before it shows up in
# pg_stat_activity, and detaches it at exit before it leaves it).
my $SAMPLE = q{
WITH a AS MATERIALIZED (SELECT * FROM ssl_renegotiate_activity),
     na AS MATERIALIZED (SELECT count(*) AS n FROM a),
     s AS MATERIALIZED (
       SELECT pid, usesysid, sslversion, sslcipher
       FROM pg_stat_get_activity(CASE WHEN (SELECT n FROM na) >= 0 THEN NULL::integer END)
       WHERE ssl)
SELECT (SELECT n FROM na),
       (SELECT count(*) FROM s),
       (SELECT count(*) FROM a JOIN s USING (pid)
         WHERE a.version = s.sslversion AND a.cipher = s.sslcipher
           AND a.usesysid = s.usesysid),
       (SELECT count(*) FROM a JOIN s USING (pid)
         WHERE a.version IS DISTINCT FROM s.sslversion
            OR a.cipher IS DISTINCT FROM s.sslcipher
            OR (a.usesysid IS DISTINCT FROM s.usesysid AND a.usesysid <> 0)),
       (SELECT count(*) FROM a JOIN s USING (pid) WHERE a.usesysid = 0),
       (SELECT coalesce(string_agg(pid::text, ' '), '') FROM a
         WHERE pid NOT IN (SELECT pid FROM s)),
       (SELECT coalesce(string_agg(pid::text, ' '), '') FROM s
         WHERE pid NOT IN (SELECT pid FROM a)),
       (SELECT count(*) FROM a
         WHERE version IS NULL OR cipher IS NULL
            OR bytes_sent IS NULL OR bytes_received IS NULL
            OR records_sent IS NULL OR records_received IS NULL
            OR rekeys_sent IS NULL OR rekeys_received IS NULL
            OR rekey_failures IS NULL OR rekey_time IS NULL
            OR sent_since_rekey IS NULL OR received_since_rekey IS NULL
            OR max_sent_per_key IS NULL OR max_received_per_key IS NULL
            OR rekey_pending IS NULL OR rekeys_skipped IS NULL
            OR renegotiations_refused IS NULL
            OR records_sent_since_rekey IS NULL
            OR records_received_since_rekey IS NULL),
       (SELECT count(*) FROM a WHERE backend_type <> 'client backend'),
       (SELECT coalesce(sum(rekeys_sent), 0) || ' ' || coalesce(sum(rekeys_received), 0) FROM a)
};
my @SAMPLE_COLS = qw(view_rows ssl_rows matched mismatched unpublished
  view_only ssl_only null_rows non_client rekeys);

sub sample
{
	my $out = $mon->query_safe($SAMPLE);
	my %r;
	@r{@SAMPLE_COLS} = split /\|/, $out, -1;
	die "bad sample output: $out" unless defined $r{rekeys};
	return \%r;
}

sub sample_str
{
	my ($r) = @_;
	return join(' ', map { "$_=$r->{$_}" } @SAMPLE_COLS);
}

# Exact comparison, for samples where no backend can be coming or going.
sub check_exact
{
	my ($r, $expected, $what) = @_;
	my $ok =
		 $r->{view_rows} == $expected
	  && $r->{ssl_rows} == $expected
	  && $r->{matched} == $expected
	  && $r->{mismatched} == 0
	  && $r->{unpublished} == 0
	  && $r->{view_only} eq ''
	  && $r->{ssl_only} eq ''
	  && $r->{null_rows} == 0
	  && $r->{non_client} == 0;
	ok($ok,
		"$what: view == pg_stat_ssl: $expected rows, same pids, version, cipher, user; no NULLs"
	) or diag(sample_str($r));
	return $ok;
}

# EXPLAIN ANALYZE of a read of the view: execution time in ms
sub read_time
{
	my ($sql) = @_;
	my $out = $mon->query_safe("EXPLAIN (ANALYZE, COSTS OFF) $sql");
	return $out =~ /Execution Time: ([\d.]+) ms/ ? $1 : undef;
}

sub median
{
	my @v = sort { $a <=> $b } @_;
	return $v[ int(@v / 2) ];
}

# ------------------------------------------------------- launch pgbench
# -S's query behind the gate.
my $script = "$dir/gated_select.sql";
open my $fh, '>', $script or die "$script: $!";
print $fh <<"EOS";
SELECT pg_advisory_lock_shared($GATE);
SELECT pg_advisory_unlock_shared($GATE);
\\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
EOS
close $fh;

my ($pgb_out, $pgb_err) = ('', '');
my $pgbench;
{
	local %ENV = %ENV;
	delete $ENV{$_}
	  for qw(PGSERVICE PGHOSTADDR PGUSER PGAPPNAME PGSSLCERT PGSSLKEY);
	$ENV{PGHOST} = '127.0.0.1';
	$ENV{PGPORT} = $node->port;
	$ENV{PGDATABASE} = 'postgres';
	$ENV{PGSSLMODE} = 'require';
	$ENV{PGSSLMINPROTOCOLVERSION} = 'TLSv1.3';
	$ENV{PGGSSENCMODE} = 'disable';
	$ENV{PGOPTIONS} = '-c ssl_renegotiate.byte_limit=1kB';
	$pgbench = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $N, '-j', '4', '-t', $TX, '-f', $script ],
		'<',
		\undef,
		'>',
		\$pgb_out,
		'2>',
		\$pgb_err,
		IPC::Run::timeout(4 * $PostgreSQL::Test::Utils::timeout_default));
}
my $t_launch = time;

# the two COPY sessions (TLS 1.3, 64kB), connected before the gate opens
my @copiers;
for my $i (0, 1)
{
	my $c = background_tls_psql($node,
		tls_connstr($node, tls => '1.3', application_name => "copy$i"));
	$c->set_query_timer_restart;
	$c->query_safe(q{SET ssl_renegotiate.byte_limit = '64kB'});
	push @copiers, $c;
}

ok( $node->poll_query_until(
		'postgres', qq{SELECT count(*) = $N FROM pg_stat_activity
		 WHERE application_name = 'pgbench' AND wait_event = 'advisory'}),
	"all $N pgbench clients connected over TLS and waiting at the gate");
note
  sprintf('%d TLS connections established in %.1f s', $N, time - $t_launch);

# ------------------------------------------------------- 1. frozen phase
my $expected = $N + 2;
for my $k (1 .. 3)
{
	check_exact(sample(), $expected, "frozen sample $k");
}
is( $node->safe_psql(
		'postgres', qq{SELECT count(*) FROM ssl_renegotiate_activity a
		 JOIN pg_stat_activity p USING (pid)
		 WHERE p.application_name = 'pgbench' AND a.version = 'TLSv1.3'}),
	$N,
	"each pgbench backend has a TLSv1.3 row");

my (@t_view, @t_ssl);
for (1 .. 7)
{
	push @t_view, read_time('SELECT * FROM ssl_renegotiate_activity');
	push @t_ssl, read_time('SELECT * FROM pg_stat_ssl');
}
note sprintf(
	'read of ssl_renegotiate_activity with %d rows (frozen): median %.3f ms [%.3f-%.3f]; pg_stat_ssl: median %.3f ms',
	$expected, median(@t_view), (sort { $a <=> $b } @t_view)[ 0, -1 ],
	median(@t_ssl));

# ------------------------------------------------------ 2. running phase
my $out_file = "$dir/out.copy";
$copiers[0]->query_until(qr/copy started/,
	"\\echo copy started\n\\copy src TO '$out_file'\n");
$copiers[1]->query_until(qr/copy started/,
	"\\echo copy started\n\\copy dst FROM '$src_file'\n");
$mon->query_safe("SELECT pg_advisory_unlock($GATE)");

my ($samples, $exact, $racy, $bad) = (0, 0, 0, 0);
my (@t_view_run, %max_rekeys);

# Samples taken while clients run are compared with the race allowed for:
# a client that has done its transactions disconnects, and its backend
# leaves the view (detach, at exit) a moment before pg_stat_ssl.  What is
# never acceptable: a row whose version, cipher or user differs from
# pg_stat_ssl's, NULL counters, a row that is not a client backend.
sub running_sample
{
	my $r = sample();
	$samples++;
	my ($rs, $rr) = split / /, $r->{rekeys};
	$max_rekeys{sent} = $rs if $rs > ($max_rekeys{sent} // 0);
	$max_rekeys{received} = $rr if $rr > ($max_rekeys{received} // 0);
	if (   $r->{mismatched} != 0
		|| $r->{null_rows} != 0
		|| $r->{non_client} != 0)
	{
		$bad++;
		diag('bad sample: ' . sample_str($r));
	}
	if (   $r->{view_rows} == $r->{ssl_rows}
		&& $r->{matched} == $r->{view_rows}
		&& $r->{view_only} eq ''
		&& $r->{ssl_only} eq '')
	{
		$exact++;
	}
	else
	{
		$racy++;
		note "sample while clients come or go: " . sample_str($r);
	}
	push @t_view_run, read_time('SELECT * FROM ssl_renegotiate_activity')
	  if @t_view_run < 7 && $r->{view_rows} == $expected;
	$pgbench->pump_nb if $pgbench->pumpable;
	return $r;
}

# 2a. until every client has rotated its keys a few more times
my ($rs0, $rr0) = split / /, sample()->{rekeys};
while ($pgbench->pumpable)
{
	my ($rs, $rr) = split / /, running_sample()->{rekeys};
	last if $rs >= $rs0 + 2 * $N && $rr >= $rr0 + $N;
	usleep(100_000);
}

# 2b. freeze them again: every pgbench backend still there waits at the
# gate, so none is coming or going, and the comparison must be exact
if ($pgbench->pumpable)
{
	$mon->query_safe("SELECT pg_advisory_lock($GATE)");
	ok( $node->poll_query_until(
			'postgres',
			q{SELECT count(*) = count(*) FILTER (WHERE wait_event = 'advisory')
			 FROM pg_stat_activity WHERE application_name = 'pgbench'}),
		'refrozen: every remaining pgbench client waits at the gate');
	my $left = $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'}
	);
	note "refrozen with $left of $N pgbench clients still connected";
	my $r = sample();
	check_exact($r, $left + 2, 'refrozen after rekeying');
	note 'refrozen: ' . sample_str($r);
	$mon->query_safe("SELECT pg_advisory_unlock($GATE)");
}
else
{
	note 'pgbench finished before it could be frozen again';
}

# 2c. until pgbench is done
while ($pgbench->pumpable)
{
	running_sample();
	usleep(100_000);
}
my $pgb_ok = $pgbench->finish;
ok($pgb_ok, 'pgbench exits with 0')
  or diag("stdout:\n$pgb_out\nstderr:\n$pgb_err");
my $total_tx = $N * $TX;
like(
	$pgb_out,
	qr/number of transactions actually processed: $total_tx\/$total_tx\b/,
	"pgbench: all $total_tx transactions processed"
) or diag("stdout:\n$pgb_out\nstderr:\n$pgb_err");
note "pgbench: "
  . join('; ', grep { /tps|latency|connection time/ } split /\n/, $pgb_out);
is($bad, 0, "running phase: $samples samples, no mismatch, no NULL counters");
note
  "running phase: $samples samples, $exact exact, $racy while clients came or went";
note sprintf(
	'read of ssl_renegotiate_activity with %d rows while rekeying: median %.3f ms [%.3f-%.3f] (%d reads)',
	$expected, median(@t_view_run),
	(sort { $a <=> $b } @t_view_run)[ 0, -1 ],
	scalar @t_view_run) if @t_view_run;

# the COPYs
for my $c (@copiers)
{
	is($c->query_safe('SELECT 1'), '1', 'COPY session finished its COPY');
}
is(file_md5($out_file), $src_md5,
	'COPY TO over TLS 1.3 at 64kB: file identical to the server\'s COPY');
is($node->safe_psql('postgres', "$HASH dst x"),
	$src_hash,
	'COPY FROM over TLS 1.3 at 64kB: table identical to the source');
for my $i (0, 1)
{
	my $row = query_row_hash($node,
		"SELECT a.* FROM ssl_renegotiate_activity a JOIN pg_stat_activity p USING (pid) WHERE p.application_name = 'copy$i'"
	);
	my $dir_col = $i == 0 ? 'sent' : 'received';
	cmp_ok($row->{"bytes_$dir_col"},
		'>', $src_size, "copy$i: more than the file's size $dir_col");
	# (receive side: libpq answers a KeyUpdate request only when it reads,
	# during COPY FROM only when its socket is full, so the client key
	# changes every few MB only: docs/clients.md)
	cmp_ok(
		$row->{"rekeys_$dir_col"},
		'>=',
		$i == 0 ? int($src_size / 65536 / 2) : 1,
		"copy$i: rekeys of the $dir_col direction");
	note
	  "copy$i: bytes_sent=$row->{bytes_sent} bytes_received=$row->{bytes_received} "
	  . "rekeys_sent=$row->{rekeys_sent} rekeys_received=$row->{rekeys_received} "
	  . "max_sent_per_key=$row->{max_sent_per_key} max_received_per_key=$row->{max_received_per_key}";
}

# ---------------------------------------------------------- 3. after
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
		 WHERE application_name = 'pgbench'}),
	'every pgbench backend has exited');
check_exact(sample(), 2, 'after pgbench');

my $tot = totals_row($node);
note "totals: " . join(' ', map { "$_=$tot->{$_}" } sort keys %$tot);
is( $tot->{connections},
	$N + 3,
	'totals.connections: every session counted once (N clients, pgbench\'s setup connection, 2 COPY sessions)'
);
cmp_ok($tot->{rekeys_sent}, '>', 0, 'totals.rekeys_sent > 0');
cmp_ok($tot->{rekeys_received}, '>', 0, 'totals.rekeys_received > 0');
cmp_ok($tot->{rekeys_sent}, '>=', $N,
	'at 1kB every pgbench session rotated its sending key (at least N rotations)'
);
is($tot->{rekey_failures}, 0, 'no rekey failures');
is($tot->{terminations}, 0, 'no terminations');
note
  "largest sums of rekeys seen in one sample: sent=$max_rekeys{sent} received=$max_rekeys{received}";

# --------------------------------------------------------- shared memory
sub shmem
{
	my ($n) = @_;
	# the slots ('ssl_renegotiate') and the totals ('ssl_renegotiate totals')
	my ($size, $alloc) = split /\|/, $n->safe_psql(
		'postgres',
		q{SELECT sum(size), sum(allocated_size) FROM pg_shmem_allocations
		   WHERE name IN ('ssl_renegotiate', 'ssl_renegotiate totals')});
	my $mb = $n->safe_psql(
		'postgres',
		q{SELECT current_setting('max_connections')::int
		   + CASE WHEN current_setting('server_version_num')::int >= 180000
		          THEN current_setting('autovacuum_worker_slots', true)::int
		          ELSE current_setting('autovacuum_max_workers')::int END
		   -- the autovacuum launcher; from 17 on also the slot sync worker
		   + CASE WHEN current_setting('server_version_num')::int >= 170000 THEN 2 ELSE 1 END
		   + current_setting('max_worker_processes')::int
		   + current_setting('max_wal_senders')::int});
	return ($size, $alloc, $mb);
}
my ($size1, $alloc1, $mb1) = shmem($node);

my $small = new_tls_node('small',
	conf => "max_connections = 100\nshared_buffers = 16MB\n");
$small->start;
my ($size2, $alloc2, $mb2) = shmem($small);
$small->stop;

my $per_slot = ($size1 - $size2) / ($mb1 - $mb2);
my $header = $size1 - $per_slot * $mb1;
note
  "shared memory 'ssl_renegotiate' and 'ssl_renegotiate totals': max_connections=$max_connections (MaxBackends $mb1): size $size1, allocated $alloc1; "
  . "max_connections=100 (MaxBackends $mb2): size $size2, allocated $alloc2; "
  . "=> $per_slot bytes per slot + $header bytes";
is( $size2,
	$header + $per_slot * $mb2,
	'shared memory is linear in MaxBackends');
cmp_ok($header, '>', 0, 'a fixed part (lock pointer and totals)');
cmp_ok($header, '<', 1024, '... of less than 1 kB');
SKIP:
{
	skip
	  "424 bytes per slot (SslrSlot, its baseline and its request count) is documented for x86-64 only",
	  1
	  unless $Config{archname} =~ /x86_64/;
	is($per_slot, 424,
		'x86-64: 424 bytes per backend slot, as docs/reference.md says');
}
cmp_ok($alloc1, '>=', $size1, 'allocated_size >= size');

# -------------------------------------------------------------- the log
$_->quit for @copiers;
$mon->quit;
my $log = slurp_file($node->logfile, $log_start);
my @bad = grep { /\b(ERROR|FATAL|PANIC|WARNING):|SSL|terminated by signal/i }
  split /\n/, $log;
# the start-up lines mention neither; anything else is a problem
is(scalar(@bad), 0,
	'no SSL error, ERROR, FATAL, PANIC, WARNING or crash in the log')
  or diag(join("\n", @bad[ 0 .. ($#bad < 29 ? $#bad : 29) ]));

$node->stop;
done_testing();
