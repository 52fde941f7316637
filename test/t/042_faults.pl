
# Faults: clients killed mid-COPY, a backend killed (crash restart), a
# clean restart, and DROP/CREATE EXTENSION under live TLS sessions.
#
# (a) A psql client is killed with SIGKILL in the middle of an endless
#     COPY TO and of an endless COPY FROM, on TLS 1.3 with limit 64kB and
#     on TLS 1.2 with tls12 = renegotiate at 64kB (so that a rotation is
#     often in flight when the client dies).  The backend must exit, its
#     counts must reach the totals, nothing may crash, and a concurrent
#     session's COPY (same TLS settings) must complete with the right data.
#     The concurrent COPY is held at a "gate" (an advisory lock taken by a
#     function halfway through the rows) while the client is killed, so it
#     is certainly in the middle of its COPY at that moment.
# (b) A TLS backend is killed with SIGKILL: the postmaster kills the others
#     and reinitializes shared memory; the extension's memory is rebuilt:
#     no stale rows, totals zero (they are lost, by design, see README),
#     stats_reset after the kill, new sessions counted exactly.
# (c) An immediate stop and a start: the same (the totals start over; a
#     clean restart keeps them, see test/t/043_restart.pl).
# (d) DROP EXTENSION and CREATE EXTENSION while TLS sessions run, one of
#     them held mid-COPY: the COPY completes with the right data and the
#     sessions' rows, after CREATE EXTENSION, show everything since their
#     connection started (counting lives in the preloaded library, not in
#     the SQL objects), equal to the kernel's counts.

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SslrTest;

my $ROWS = $ENV{SSLR_FAULTS_COPY_ROWS} // 80_000;    # ~8 MB of COPY text
my $HALF = int($ROWS / 2);
my $GATE = 4243;

my $node = new_tls_node('faults', conf => <<'EOC');
restart_after_crash = on
log_statement = none
autovacuum = off
EOC
my $log_start = -s $node->logfile
  // 0;    # the log may exist from an earlier run
$node->start;

my $dir = PostgreSQL::Test::Utils::tempdir('faults');
my $src_file = "$dir/src.copy";
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION ssl_renegotiate;
	CREATE TABLE src AS
	  SELECT i, md5(i::text) AS h, repeat(chr(97 + i % 26), 40 + i % 31) AS s
	  FROM generate_series(1, $ROWS) i;
	COPY src TO '$src_file';
	CREATE TABLE sink (line text);

	-- true; at row "at" it first waits for a shared advisory lock: the
	-- test holds it exclusively to keep a COPY in the middle
	CREATE FUNCTION gate(i int, at int) RETURNS bool LANGUAGE plpgsql AS \$\$
	BEGIN
	  IF i = at THEN PERFORM pg_advisory_xact_lock_shared($GATE); END IF;
	  RETURN true;
	END \$\$;
	CREATE FUNCTION gate_trigger() RETURNS trigger LANGUAGE plpgsql AS \$\$
	BEGIN
	  PERFORM gate(NEW.i, $HALF);
	  RETURN NEW;
	END \$\$;
	CREATE TABLE dst (LIKE src);
	CREATE TRIGGER gate BEFORE INSERT ON dst FOR EACH ROW EXECUTE FUNCTION gate_trigger();
});
my $src_md5 = file_md5($src_file);
my $src_size = -s $src_file;
my $HASH = q{SELECT count(*) || ':' ||
  coalesce(sum(('x' || substr(md5(x::text), 1, 15))::bit(60)::bigint), 0) FROM };
my $src_hash = $node->safe_psql('postgres', "$HASH src x");
note sprintf('COPY data: %d rows, %.1f MB', $ROWS, $src_size / 1e6);

# The Unix-socket session that holds the gate.
my $mon = $node->background_psql('postgres');
$mon->set_query_timer_restart;

my @COUNTERS = qw(bytes_sent bytes_received records_sent records_received
  rekeys_sent rekeys_received);

sub log_pos { return -s $node->logfile; }

sub settings_connstr
{
	my ($tls, $app) = @_;
	my $opts = '-c ssl_renegotiate.byte_limit=64kB';
	$opts .= ' -c ssl_renegotiate.tls12=renegotiate' if $tls eq '1.2';
	return tls_connstr(
		$node,
		tls => $tls,
		application_name => $app,
		extra => "options='$opts'");
}

sub backend_pid_of
{
	my ($app) = @_;
	my $pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = '$app'"
	) or return undef;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$app'");
}

# totals and one session's row, read in one query
sub totals_and_row
{
	my ($pid) = @_;
	my $out = $node->safe_psql(
		'postgres', qq{SELECT row_to_json(t),
		  (SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = $pid)
		FROM ssl_renegotiate_totals t});
	my ($t, $a) = split /\|/, $out;
	return (JSON::PP::decode_json($t), JSON::PP::decode_json($a));
}

sub wait_killed
{
	my ($pid, $what) = @_;
	my $t0 = time;
	my $ok = $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid");
	ok($ok, "$what: backend $pid has exited");
	note sprintf('%s: backend gone %.2f s after the kill', $what, time - $t0);
	return $ok;
}

# ---------------------------------------------------------------- (a)
my $case = 0;
my @TLS = split / /, $ENV{SSLR_FAULTS_TLS} // '1.3 1.2';    # for development
for my $tls (@TLS)
{
	for my $dirn ('TO', 'FROM')
	{
		$case++;
		my $what =
			"(a) TLS $tls"
		  . ($tls eq '1.2' ? ' renegotiate' : '')
		  . " 64kB, client killed in COPY $dirn";
		my $log0 = log_pos();

		# the bystander: same settings, connected first
		my $bys = background_tls_psql($node,
			settings_connstr($tls, "bystander$case"));
		$bys->set_query_timer_restart;
		my $bys_pid = $bys->query_safe('SELECT pg_backend_pid()');
		$node->safe_psql('postgres', 'TRUNCATE dst');
		my ($t0, $b0) = totals_and_row($bys_pid);

		# the victim: an endless COPY
		my $app = "victim$case";
		my ($vout, $verr) = ('', '');
		my $h;
		if ($dirn eq 'TO')
		{
			# a set-returning function in the target list streams (a
			# function in FROM would be materialized first)
			$h = IPC::Run::start(
				[
					'psql',
					'-X',
					'-q',
					'-d',
					settings_connstr($tls, $app),
					'-c',
					"COPY (SELECT generate_series(1, 2000000000) AS i, repeat('x', 200) AS s) TO STDOUT"
				],
				'<',
				\undef,
				'>',
				'/dev/null',
				'2>',
				\$verr);
		}
		else
		{
			$h = IPC::Run::start(
				[ 'yes', 'a line of COPY text, repeated for ever by yes(1)' ],
				'|',
				[
					'psql', '-X',
					'-q', '-d',
					settings_connstr($tls, $app), '-c',
					'COPY sink FROM STDIN'
				],
				'>',
				\$vout,
				'2>',
				\$verr);
		}
		my $vpid = backend_pid_of($app);
		ok(defined $vpid, "$what: victim backend started");

		# wait until it has carried 1 MB in its direction and a rotation
		# happened or is in flight
		my $col = $dirn eq 'TO' ? 'sent' : 'received';
		my $last;
		my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
		while (time < $deadline)
		{
			$last = activity_row($node, $vpid);
			last unless $last;    # gone: fails below
			last
			  if $last->{"bytes_$col"} >= 1_000_000
			  && ($last->{"rekeys_$col"} >= 1 || $last->{rekey_pending});
			usleep(50_000);
		}
		unless (
			ok( $last && $last->{"bytes_$col"} >= 1_000_000,
				"$what: the victim has $col more than 1 MB"))
		{
			$h->pump_nb if $h->pumpable;
			diag("victim's row: " . explain($last) . "psql's stderr: $verr");
			diag("server log:\n" . slurp_file($node->logfile, $log0));
			BAIL_OUT("$what: the victim did not get going");
		}
		is($last->{version}, "TLSv$tls", "$what: victim on TLSv$tls");

		# the bystander's COPY, held at the gate halfway
		$mon->query_safe("SELECT pg_advisory_lock($GATE)");
		my $bys_out = "$dir/bys$case.copy";
		if ($case % 2)
		{
			$bys->query_until(qr/copy started/,
				"\\echo copy started\n\\copy dst FROM '$src_file'\n");
		}
		else
		{
			$bys->query_until(
				qr/copy started/,
				"\\echo copy started\n\\copy (SELECT * FROM src WHERE gate(i, $HALF)) TO '$bys_out'\n"
			);
		}
		ok( $node->poll_query_until(
				'postgres',
				"SELECT wait_event = 'advisory' FROM pg_stat_activity WHERE pid = $bys_pid"
			),
			"$what: the bystander is in the middle of its COPY, held at the gate"
		);

		# kill the client
		$last = activity_row($node, $vpid);
		note "$what: victim just before the kill: "
		  . join(' ', map { "$_=$last->{$_}" } @COUNTERS, 'rekey_pending');
		my $psql_pid = $h->{KIDS}[ $dirn eq 'TO' ? 0 : 1 ]{PID};
		ok(kill('KILL', $psql_pid),
			"$what: psql (pid $psql_pid) killed with SIGKILL");
		wait_killed($vpid, $what);
		eval { $h->finish; };

		# let the bystander finish
		$mon->query_safe("SELECT pg_advisory_unlock($GATE)");
		is($bys->query_safe('SELECT 1'),
			'1', "$what: the bystander's COPY completed");
		if ($case % 2)
		{
			is( $node->safe_psql('postgres', "$HASH dst x"),
				$src_hash,
				"$what: bystander's COPY FROM: table identical to the source"
			);
		}
		else
		{
			is(file_md5($bys_out), $src_md5,
				"$what: bystander's COPY TO: file identical to the server's COPY"
			);
		}

		# the victim's counts reached the totals: (T1 - T0) - (B1 - B0)
		my ($t1, $b1) = totals_and_row($bys_pid);
		is($t1->{connections} - $t0->{connections},
			1, "$what: totals.connections grew by one (the victim)");
		my %victim =
		  map { $_ => ($t1->{$_} - $t0->{$_}) - ($b1->{$_} - $b0->{$_}) }
		  @COUNTERS;
		note "$what: victim's final counts in the totals: "
		  . join(' ', map { "$_=$victim{$_}" } @COUNTERS);
		for my $c (@COUNTERS)
		{
			cmp_ok($victim{$c}, '>=', $last->{$c},
				"$what: totals got the victim's $c (>= the last value seen, $last->{$c})"
			);
		}
		cmp_ok($b1->{rekeys_sent} + $b1->{rekeys_received},
			'>', 0, "$what: the bystander rotated keys during its COPY");

		my $log = slurp_file($node->logfile, $log0);
		unlike(
			$log,
			qr/terminated by signal|PANIC|was terminated|TRAP:/,
			"$what: no crash in the log");
		note "$what: log lines: "
		  . join(' | ',
			grep { /\b(ERROR|FATAL|WARNING|LOG):/ } split /\n/, $log);
		# A client killed with our KeyUpdate request unread in its receive
		# buffer answers with a RST, so the server's first write after the
		# kill (the ERROR) already fails.  OpenSSL would refuse PostgreSQL's
		# next, shorter write with "SSL error: bad length"; the extension
		# sends nothing more once the connection is known to be lost.
		# (PostgreSQL 16 and later report a client that vanished in the
		# middle of a record as "SSL error: unexpected eof while reading":
		# that one is the kill itself, not a write after it.  OpenSSL 4.0
		# refuses every write on a connection whose read failed, before
		# touching the socket and without an error on its queue, which
		# PostgreSQL logs as "SSL error: no SSL error reported": nothing
		# was written.)
		my $refused_unsent =
		  openssl_at_least(4, 0)
		  ? qr/SSL error: no SSL error reported/
		  : qr/(?!)/;
		my @ssl_errors =
		  grep {
			!/SSL error: unexpected eof while reading/ && !/$refused_unsent/
		  } ($log =~ /^.*SSL error.*$/mg);
		is(join("\n", @ssl_errors),
			'', "$what: no \"SSL error\" line in the log");
		$bys->quit;
	}
}

# ---------------------------------------------------------------- (b)
$mon->quit;
{
	my $what = '(b) backend killed';
	# a few TLS sessions with traffic, so that stale rows would show
	my @sessions = map {
		my $s = background_tls_psql(
			$node,
			tls_connstr(
				$node,
				tls => ($_ % 2 ? '1.3' : '1.2'),
				application_name => "pre$_"));
		$s->query_safe("SELECT repeat('x', 100000)");
		$s
	} 1 .. 3;
	my $victim_pid = $sessions[0]->query_safe('SELECT pg_backend_pid()');
	is( $node->safe_psql(
			'postgres', 'SELECT count(*) FROM ssl_renegotiate_activity'),
		'3',
		"$what: 3 TLS sessions before the kill");
	cmp_ok(totals_row($node)->{connections},
		'>', 3, "$what: totals count earlier connections");
	my $kill_time = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	my $log0 = log_pos();
	ok(kill('KILL', $victim_pid),
		"$what: backend $victim_pid killed with SIGKILL");
	$node->wait_for_log(qr/all server processes terminated; reinitializing/,
		$log0);
	# poll only once it listens again: a psql that cannot connect exits
	# before reading its query, and IPC::Run (PostgreSQL 19's harness) dies
	# of the broken pipe
	$node->wait_for_log(
		qr/reinitializing(?s:.*)database system is ready to accept connections/,
		$log0);
	ok( $node->poll_query_until('postgres', 'SELECT 1', '1'),
		"$what: the server accepts connections again");
	my $log = slurp_file($node->logfile, $log0);
	# "server process" before PostgreSQL 18, "client backend" since
	like(
		$log,
		qr/(?:server process|client backend) \(PID $victim_pid\) was terminated by signal 9/,
		"$what: the postmaster saw the kill");
	for my $s (@sessions)
	{
		eval { $s->quit; };
	}

	check_fresh($what, $kill_time);
}

# ---------------------------------------------------------------- (c)
{
	my $what = '(c) immediate stop and start';
	my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	$s->query_safe("SELECT repeat('x', 100000)");
	$s->quit;
	cmp_ok(totals_row($node)->{connections},
		'>=', 2, "$what: totals count connections before");
	my $restart_time =
	  $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	$node->stop('immediate');
	$node->start;
	check_fresh($what, $restart_time);
}

# After (b) and (c): rebuilt shared memory, and counting works.
sub check_fresh
{
	my ($what, $since) = @_;
	is( $node->safe_psql(
			'postgres', 'SELECT count(*) FROM ssl_renegotiate_activity'),
		'0',
		"$what: no rows (no stale slots)");
	my $t = totals_row($node);
	is_deeply(
		[
			map { $t->{$_} } 'connections', @COUNTERS,
			'rekey_failures', 'terminations'
		],
		[ (0) x (3 + @COUNTERS) ],
		"$what: totals start over from zero");
	is( $node->safe_psql(
			'postgres',
			"SELECT stats_reset > '$since' FROM ssl_renegotiate_totals"),
		't',
		"$what: stats_reset ($t->{stats_reset}) is after the event ($since)");

	my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe("SELECT repeat('y', 200000)");
	is( $node->safe_psql(
			'postgres',
			'SELECT count(*) || \'/\' || count(*) FILTER (WHERE pid = '
			  . $pid
			  . ') FROM ssl_renegotiate_activity'),
		'1/1',
		"$what: a new TLS session has the only row");
	ok(wait_idle($node, $pid), "$what: new session idle");
	my ($krcv, $ksent) = kernel_tls_counts($node, $pid);
	my $row = activity_row($node, $pid);
	is_deeply(
		[ $row->{bytes_received}, $row->{bytes_sent} ],
		[ $krcv, $ksent ],
		"$what: its counts equal the kernel's ($row->{bytes_received} received, $row->{bytes_sent} sent)"
	);
	my $t2 = totals_row($node);
	is_deeply(
		[ $t2->{connections}, $t2->{bytes_sent}, $t2->{bytes_received} ],
		[ 1, $row->{bytes_sent}, $row->{bytes_received} ],
		"$what: totals = that one session");
	$s->quit;
	return;
}

# ---------------------------------------------------------------- (d)
{
	my $what = '(d) DROP/CREATE EXTENSION';
	$mon = $node->background_psql('postgres');
	$mon->set_query_timer_restart;
	my $stats_reset0 = totals_row($node)->{stats_reset};
	my $x = background_tls_psql($node, settings_connstr('1.3', 'copier'));
	$x->set_query_timer_restart;
	my $y = background_tls_psql($node,
		tls_connstr($node, tls => '1.3', application_name => 'idle'));
	my $xpid = $x->query_safe('SELECT pg_backend_pid()');
	my $ypid = $y->query_safe('SELECT pg_backend_pid()');
	$y->query_safe("SELECT repeat('z', 50000)");
	my $conns0 = totals_row($node)->{connections};

	$node->safe_psql('postgres', 'TRUNCATE dst');
	$mon->query_safe("SELECT pg_advisory_lock($GATE)");
	$x->query_until(qr/copy started/,
		"\\echo copy started\n\\copy dst FROM '$src_file'\n");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT wait_event = 'advisory' FROM pg_stat_activity WHERE pid = $xpid"
		),
		"$what: the copying session is in the middle of its COPY FROM");
	my $before = activity_row($node, $xpid);

	$node->safe_psql('postgres', 'DROP EXTENSION ssl_renegotiate');
	my ($rc, $out, $err) =
	  $node->psql('postgres', 'SELECT * FROM ssl_renegotiate_activity');
	isnt($rc, 0, "$what: after DROP EXTENSION the view is gone");
	is( $node->safe_psql(
			'postgres',
			"SELECT state || '/' || wait_event FROM pg_stat_activity WHERE pid = $xpid"
		),
		'active/advisory',
		"$what: the COPY is still running");
	$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

	my $during = activity_row($node, $xpid);
	ok($during,
		"$what: after CREATE EXTENSION the copying session has its row again"
	);
	cmp_ok(
		$during->{bytes_received},
		'>=',
		$before->{bytes_received},
		"$what: ... with the bytes received before the DROP and since");
	$mon->query_safe("SELECT pg_advisory_unlock($GATE)");
	is($x->query_safe('SELECT 1'), '1', "$what: the COPY completed");
	is($node->safe_psql('postgres', "$HASH dst x"),
		$src_hash, "$what: the table is identical to the source");

	for my $p ([ 'copying', $xpid ], [ 'idle', $ypid ])
	{
		my ($name, $pid) = @$p;
		ok(wait_idle($node, $pid), "$what: $name session idle");
		my ($krcv, $ksent) = kernel_tls_counts($node, $pid);
		my $row = activity_row($node, $pid);
		is_deeply(
			[ $row->{bytes_received}, $row->{bytes_sent} ],
			[ $krcv, $ksent ],
			"$what: $name session's counts since its connection equal the kernel's"
		);
	}
	my $xrow = activity_row($node, $xpid);
	cmp_ok($xrow->{bytes_received},
		'>', $src_size, "$what: the whole COPY was counted");
	cmp_ok($xrow->{rekeys_received}, '>=', 1, "$what: ... and its rekeys");
	my $t = totals_row($node);
	is($t->{stats_reset}, $stats_reset0, "$what: the totals were not reset");
	is($t->{connections}, $conns0, "$what: totals.connections unchanged");
	$x->quit;
	$y->quit;
}

$mon->quit;

# -------------------------------------------------------------- the log
my $log = slurp_file($node->logfile, $log_start);
my @signals = $log =~ /(terminated by signal \d+)/g;
is(scalar(@signals), 1,
	'the only "terminated by signal" in the log is the kill of (b)');
unlike($log, qr/PANIC|TRAP:/, 'no PANIC or assertion failure in the log');

$node->stop;
done_testing();
