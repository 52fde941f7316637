
# Copyright (c) 2026, ssl_renegotiate developers
#
# No role learns anything of another role's traffic: by privilege, not by
# timing (issue 26 of 1.2: each section below is one of its findings).
#
# A plain role (regress_plain, no privileges, reading over the Unix socket
# so that its reads add no TLS bytes) attacks a victim that logs in over
# hostssl with the "password" method, which sends the password in clear
# inside TLS: the PasswordMessage is the password's length + 28 bytes.
# What the plain role reads of the extension (plain_view: the totals but
# their reset time, every row per database and role it can see, and how
# many activity rows show it counters) must not change with the victim's
# password length or activity.  A member of pg_read_all_stats
# (regress_monitor) still reads the exact counts, equal to the kernel's
# counts of the client's socket (less the SSLRequest exchange).
#
#  1. Login-only sessions with passwords of 1, 8 and 50 characters: the
#     plain view never moves, live or after; the monitor sees each login,
#     and the three differ by exactly the password lengths' differences.
#  2. Failed logins on a quiet cluster (wrong passwords of 1 and 19
#     characters): the same.
#  3. A single-purpose superuser session that only changes a password:
#     nothing of it reaches the plain view.
#  4. Silent TCP connections and handshake-only TLS connections by the
#     dozen (what used up 1.2's buffers of counts before authentication),
#     then a victim's login while they are open: the plain view does not
#     move; the monitor counts them all and the victim exactly.  And a
#     dead-end backend (refused during a smart shutdown), silent after its
#     handshake and ended by SIGTERM (its _exit() runs no exit callback):
#     nothing for the plain view, live or after; the monitor counts it
#     exactly (section 8, at the end).
#  5. A reset while a connection that left before its startup packet is
#     pending, then a victim's login: nothing for the plain view; the
#     monitor reads the victim alone, exactly.
#  6. An anonymous client sends the SSLRequest, then the 6 bytes
#     16 03 01 ff ff 01 (a record header claiming 65,535 bytes and one byte
#     of body), and leaves: the monitor's bytes_received grows by what
#     OpenSSL read of them (never by the length claimed), bytes_sent by
#     what the client received.
#  7. A TLS backend stopped (under gdb) in the middle of a write to its
#     slot: a plain role's and a monitor's reads of the totals return, a
#     new TLS login completes, and a reader of the activity view waiting
#     for that slot can be cancelled.  Skipped without gdb.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $peer = build_hostile_peer();

my $node = new_tls_node('privacy', conf => "max_connections = 20\n");
my $hba = $node->data_dir . '/pg_hba.conf';
my $rest = slurp_file($hba);
open(my $fh, '>', $hba) or die "cannot write $hba: $!";
print $fh "hostssl all regress_victim 127.0.0.1/32 password\n", $rest;
close($fh);
$node->start;

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION ssl_renegotiate;
	CREATE ROLE regress_plain LOGIN;
	CREATE ROLE regress_monitor LOGIN;
	GRANT pg_read_all_stats TO regress_monitor;
	CREATE ROLE regress_victim LOGIN;
	CREATE ROLE regress_app LOGIN;
});

# A close_notify alert in a TLS 1.3 record: 5 bytes of header, 2 of alert,
# 1 of inner content type, a 16-byte tag.
use constant CLOSE_NOTIFY_RECORD => 5 + 2 + 1 + 16;

my @COUNTERS = qw(connections bytes_sent bytes_received records_sent
  records_received rekeys_sent rekeys_received rekey_failures
  rekeys_skipped renegotiations_refused terminations);

# Everything regress_plain reads of the extension that could hold another
# role's traffic, as one JSON text.
sub plain_view
{
	my $cols = join ', ', @COUNTERS;
	return $node->safe_psql(
		'postgres', qq{
		SELECT json_build_object(
		  'totals', (SELECT row_to_json(t) FROM (SELECT $cols FROM ssl_renegotiate_totals) t),
		  'roles', (SELECT coalesce(json_agg(r ORDER BY r.dbid, r.userid), '[]')
		            FROM ssl_renegotiate_database_role_totals r),
		  'activity_with_counters', (SELECT count(*) FROM ssl_renegotiate_activity a
		            WHERE jsonb_strip_nulls(to_jsonb(a) - 'pid' - 'usesysid' - 'backend_type') <> '{}'))},
		connstr => $node->connstr('postgres') . ' user=regress_plain');
}

# The totals as regress_monitor reads them, but stats_reset.
sub monitor_totals
{
	my $t = query_row_hash(
		$node,
		'SELECT * FROM ssl_renegotiate_totals',
		connstr => $node->connstr('postgres') . ' user=regress_monitor');
	delete $t->{stats_reset};
	return $t;
}

sub delta
{
	my ($t0, $t1, $k) = @_;
	return $t1->{$k} - $t0->{$k};
}

# Poll as regress_monitor until the totals show $n more connections than
# $t0, and nothing more arrives (the backends' exits are folded in).
sub monitor_settled
{
	my ($t0, $n) = @_;
	my $want = $t0->{connections} + $n;
	$node->poll_query_until(
		'postgres',
		"SELECT connections = $want FROM ssl_renegotiate_totals",
		't',
		connstr => $node->connstr('postgres') . ' user=regress_monitor'
	) or return undef;
	$node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 0 FROM ssl_renegotiate_activity
		  WHERE usesysid = 'regress_victim'::regrole}) or return undef;
	return monitor_totals();
}

# The monitor's totals grew by the kernel's counts of the client's socket,
# less the SYN and FIN (if any), the SSLRequest exchange, and what the
# server sent after the connection was folded in ($unseen_out).
sub matches_kernel
{
	my ($what, $t0, $t1, $r, $unseen_out) = @_;
	like($r->{tcp_bytes_acked}, qr/^\d+$/,
		"$what: the client's kernel counts")
	  or return;
	is( delta($t0, $t1, 'bytes_received'),
		$r->{tcp_bytes_acked} - 1 - SSL_REQUEST_CLIENT_BYTES,
		"$what: pg_read_all_stats: bytes_received = what the client's kernel sent, less SYN and SSLRequest"
	);
	my $sent = delta($t0, $t1, 'bytes_sent');
	my $on_wire =
	  $r->{tcp_bytes_received} - SSL_REQUEST_SERVER_BYTES - $unseen_out;
	ok( $sent == $on_wire - 1 || $sent == $on_wire,
		"$what: pg_read_all_stats: bytes_sent = what the client's kernel received, less 'S' and the FIN if any"
	  )
	  or
	  diag("bytes_sent $sent, the client's kernel $r->{tcp_bytes_received}");
	return;
}

sub wait_process_gone
{
	my ($pid) = @_;
	return wait_until(sub { !kill(0, $pid) });
}

# The victim logs in with $password (after its role's is set to
# $real_password) and runs a query, holding at each point where the plain
# view is taken; returns the peer's facts and the views taken.
sub victim_login
{
	my ($password, $real_password) = @_;
	$node->safe_psql('postgres',
		"ALTER ROLE regress_victim PASSWORD '$real_password'");
	my %seen;
	my $r = run_hostile_peer(
		$peer, $node,
		args => [
			'--user', 'regress_victim',
			'--wait-close', '--password',
			$password, 'idle-then-query'
		],
		holds => {
			map {
				my $at = $_;
				($at => sub { $seen{$at} = plain_view() })
			} qw(password_requested idle end)
		});
	return ($r, \%seen);
}

my $view0 = plain_view();
like(
	$view0,
	qr/"totals" : \{"connections":null,"bytes_sent":null,/,
	'the plain role reads the totals row with every counter NULL');

# ---------------------------------------------------------------------
# 1. login-only sessions: the password's length
# ---------------------------------------------------------------------
my %grew;
for my $len (1, 8, 50)
{
	my $password = 'p' x $len;
	my $m0 = monitor_totals();
	my ($r, $seen) = victim_login($password, $password);
	is($r->{result}, 'ok', "password of $len: the victim logged in");
	is($seen->{$_}, $view0, "password of $len: plain view unchanged ($_)")
	  for sort keys %$seen;
	my $m1 = monitor_settled($m0, 1);
	ok($m1, "password of $len: pg_read_all_stats counts the session");
	is(plain_view(), $view0,
		"password of $len: plain view unchanged after the exit");
	matches_kernel("password of $len", $m0, $m1, $r, CLOSE_NOTIFY_RECORD);
	$grew{$len} = delta($m0, $m1, 'bytes_received');
}
is( $grew{50} - $grew{8},
	42,
	'pg_read_all_stats: the logins differ by the passwords\' lengths (50 - 8)'
);
is($grew{8} - $grew{1}, 7, '... (8 - 1)');

# ---------------------------------------------------------------------
# 2. failed logins on a quiet cluster
# ---------------------------------------------------------------------
for my $len (1, 19)
{
	my $m0 = monitor_totals();
	my ($r, $seen) = victim_login('w' x $len, 'the right one');
	is($r->{result}, 'fatal', "wrong password of $len: the login failed");
	is($seen->{password_requested},
		$view0,
		"wrong password of $len: plain view unchanged while it waited");
	my $m1 = monitor_settled($m0, 1);
	is(plain_view(), $view0,
		"wrong password of $len: plain view unchanged after");
	matches_kernel("wrong password of $len",
		$m0, $m1, $r, CLOSE_NOTIFY_RECORD);
}

# ---------------------------------------------------------------------
# 3. a single-purpose admin session
# ---------------------------------------------------------------------
for my $len (5, 40)
{
	my $password = 'a' x $len;
	my $m0 = monitor_totals();
	$node->safe_psql(
		'postgres',
		"ALTER ROLE regress_app PASSWORD '$password'",
		connstr => tls_connstr($node, tls => '1.3'));
	$node->poll_query_until('postgres',
			'SELECT connections = '
		  . ($m0->{connections} + 1)
		  . ' FROM ssl_renegotiate_totals')
	  or die 'the admin session was not folded in';
	is(plain_view(), $view0,
		"admin session setting a password of $len: plain view unchanged");
	cmp_ok(delta($m0, monitor_totals(), 'bytes_received'),
		'>', $len, "admin session of $len: pg_read_all_stats sees it");
}

# ---------------------------------------------------------------------
# 4. dead-end backends and handshake-only connections by the dozen
# ---------------------------------------------------------------------
{
	my $m0 = monitor_totals();
	my @silent;
	for (1 .. 6)
	{
		push @silent,
		  IO::Socket::INET->new(
			PeerAddr => '127.0.0.1',
			PeerPort => $node->port) or die "cannot connect: $!";
	}
	my @handshakes;
	my $n = 24;
	for (1 .. $n)
	{
		my ($in, $out, $err) = ('', '', '');
		push @handshakes,
		  [
			IPC::Run::start(
				[
					'openssl', 's_client',
					'-quiet', '-starttls',
					'postgres', '-connect',
					'127.0.0.1:' . $node->port
				],
				'<',
				\$in,
				'>',
				\$out,
				'2>',
				\$err),
			\$err
		  ];
	}
	# every handshake done (the monitor counts each connection)
	ok( $node->poll_query_until(
			'postgres',
			'SELECT connections >= '
			  . ($m0->{connections} + $n)
			  . ' FROM ssl_renegotiate_totals',
			't',
			connstr => $node->connstr('postgres') . ' user=regress_monitor'),
		"flood: pg_read_all_stats counts the $n handshakes");
	my $m1 = monitor_totals();
	my ($r, $seen) = victim_login('f' x 28, 'f' x 28);
	is($r->{result}, 'ok', 'flood: the victim logged in');
	is($seen->{$_}, $view0, "flood: plain view unchanged ($_)")
	  for sort keys %$seen;
	my $m2 = monitor_settled($m1, 1);
	is(plain_view(), $view0,
		'flood: plain view unchanged after the victim left');
	matches_kernel('flood', $m1, $m2, $r, CLOSE_NOTIFY_RECORD);
	close($_) for @silent;
	$_->[0]->kill_kill for @handshakes;
}

# ---------------------------------------------------------------------
# 5. a reset while a dead connection's counts are pending
# ---------------------------------------------------------------------
{
	my $pid;
	my $r = run_hostile_peer(
		$peer, $node,
		args => [ '--no-startup', 'silence' ],
		holds => {
			silent => sub {
				$pid = backend_of_client_port($node, $_[0]->{client_port});
				kill('TERM', $pid) if defined $pid;
			}
		});
	ok(defined $pid && wait_process_gone($pid),
		'reset: a connection ended before its startup packet');
	$node->safe_psql('postgres', 'SELECT ssl_renegotiate_reset()');
	my $m0 = monitor_totals();
	is_deeply(
		[ @{$m0}{@COUNTERS} ],
		[ (0) x @COUNTERS ],
		'reset: pg_read_all_stats reads zero');
	my ($v, $seen) = victim_login('r' x 28, 'r' x 28);
	is($v->{result}, 'ok', 'reset: the victim logged in');
	is($seen->{$_}, $view0, "reset: plain view unchanged ($_)")
	  for sort keys %$seen;
	my $m1 = monitor_settled($m0, 1);
	is(plain_view(), $view0,
		'reset: plain view unchanged after the victim left');
	matches_kernel('reset', $m0, $m1, $v, CLOSE_NOTIFY_RECORD);
}

# ---------------------------------------------------------------------
# 6. a record header that claims 65,535 bytes
# ---------------------------------------------------------------------
{
	my $m0 = monitor_totals();
	my $sock =
	  IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $node->port)
	  or die "cannot connect: $!";
	# SSLRequest: length 8, code 80877103
	print $sock pack('NN', 8, 80877103);
	my $answer = '';
	sysread($sock, $answer, 1);
	is($answer, 'S', 'header: the server accepts the SSLRequest');
	syswrite($sock, "\x16\x03\x01\xff\xff\x01");
	# what the server sends back (an alert, if anything) until it closes
	my ($got, $buf) = (0, '');
	while (my $k = sysread($sock, $buf, 4096)) { $got += $k }
	close($sock);
	my $m1 = monitor_settled($m0, 1);
	my $in = delta($m0, $m1, 'bytes_received');
	note("the 6-byte header: bytes_received grew by $in, bytes_sent by "
		  . delta($m0, $m1, 'bytes_sent'));
	ok( $in == 5 || $in == 6,
		'header: bytes_received is what arrived (5 or 6 of the 6 bytes sent), not the length claimed'
	) or diag("bytes_received grew by $in");
	is(delta($m0, $m1, 'bytes_sent'),
		$got, 'header: bytes_sent is what the client received');
	is(delta($m0, $m1, 'records_received'), 1, 'header: one record');
	is(plain_view(), $view0, 'header: plain view unchanged');
}

# ---------------------------------------------------------------------
# 7. a backend stopped in the middle of a write to its slot
# ---------------------------------------------------------------------
SKIP:
{
	my $gdb = grep { -x "$_/gdb" } split /:/, $ENV{PATH};
	skip 'gdb is not installed', 7 unless $gdb;

	# the line of slots.c inside the change count, in sslr_slot_publish_request
	my $src = dirname(__FILE__) . '/../../src/stats/slots.c';
	my @lines = split /\n/, slurp_file($src);
	my ($line) =
	  grep { $lines[ $_ - 1 ] =~ /slot->stats\.requests_seen = seen;/ }
	  1 .. @lines;
	die "no write of requests_seen in $src" unless $line;

	# gdb needs the library's line table to stop there: scripts/setup.sh
	# builds with -g; a build without it skips rather than waits.
	my $so = $node->config_data('--pkglibdir') . '/ssl_renegotiate.so';
	my ($info) = run_command(
		[
			'gdb', '-q', '-nx', '-batch', '-ex', "info line slots.c:$line",
			$so
		]);
	skip "$so has no line table for slots.c (built without -g)", 7
	  unless $info =~ /^Line $line of "[^"]*slots\.c"/m;

	my ($vin, $vout, $verr) = ('', '', '');
	my ($gin, $gout, $gerr) =
	  ("set pagination off\nbreak slots.c:$line\ncontinue\n", '', '');
	my ($victim, $gdbh, $pid);
	# Whatever happens below, gdb lets the backend go: a backend held by a
	# gdb left behind would keep the server from stopping.
	my $release = sub {
		if ($gdbh && $gdbh->pumpable)
		{
			$gin .= "detach\nquit\n";
			eval { $gdbh->finish; 1 } or $gdbh->kill_kill;
		}
		undef $gdbh;
	};
	my $held = eval {
		$victim = IPC::Run::start(
			[ 'psql', '-X', '-At', '-d', tls_connstr($node, tls => '1.3') ],
			'<', \$vin, '>', \$vout, '2>', \$verr, IPC::Run::timeout(120));
		$vin .= "SELECT pg_backend_pid();\n";
		$victim->pump until $vout =~ /^(\d+)$/m;
		$pid = $1;

		$gdbh = IPC::Run::start([ 'gdb', '-q', '-nx', '-p', $pid ],
			'<', \$gin, '>', \$gout, '2>', \$gerr, IPC::Run::timeout(120));
		$gdbh->pump until $gout =~ /Continuing\./ || !$gdbh->pumpable;
		$node->safe_psql('postgres', "SELECT ssl_renegotiate_rekey($pid)");
		$vin .= "SELECT 1;\n";
		$victim->pump_nb;
		$gdbh->pump until $gout =~ /Breakpoint 1, / || !$gdbh->pumpable;
		1;
	};
	ok($held && $gout =~ /Breakpoint 1, /,
		'stopped: the backend is held inside a write to its slot')
	  or diag("gdb: " . ($@ || '') . "\nstdout: $gout\nstderr: $gerr");
	unless ($held && $gout =~ /Breakpoint 1, /)
	{
		$release->();
		$victim->kill_kill if $victim;
		skip 'the backend could not be held', 6;
	}

	my $psql = sub {
		my ($connstr, $sql, $secs) = @_;
		my ($out, $err) = ('', '');
		my $ok = eval {
			IPC::Run::run([ 'psql', '-X', '-At', '-d', $connstr, '-c', $sql ],
				'<', \undef, '>', \$out, '2>', \$err,
				IPC::Run::timeout($secs));
		};
		return ($ok, $out, $err);
	};
	my $unix = $node->connstr('postgres');
	my ($ok) = $psql->(
		"$unix user=regress_plain",
		'SELECT connections IS NULL FROM ssl_renegotiate_totals', 60);
	ok($ok, 'stopped: a plain role reads the totals');
	($ok) = $psql->(
		"$unix user=regress_monitor",
		'SELECT connections FROM ssl_renegotiate_totals', 60);
	ok($ok, 'stopped: pg_read_all_stats reads the totals');
	($ok) = $psql->(
		"$unix user=regress_monitor",
		'SELECT count(*) FROM ssl_renegotiate_database_role_totals', 60);
	ok($ok,
		'stopped: pg_read_all_stats reads the totals per database and role');
	my ($login, $out, $lerr) =
	  $psql->(tls_connstr($node, tls => '1.3'), 'SELECT 1', 60);
	ok($login && $out =~ /^1$/m, 'stopped: a new TLS login completes')
	  or diag("psql: ok=" . ($login // 'undef') . " out=$out err=$lerr");
	my (undef, undef, $err) = $psql->(
		"$unix user=regress_monitor",
		"SET statement_timeout = '2s'; SELECT count(*) FROM ssl_renegotiate_activity WHERE pid = $pid",
		60);
	like(
		$err,
		qr/canceling statement due to statement timeout/,
		'stopped: a reader waiting for the slot can be cancelled');

	$release->();
	$vin .= "SELECT 'alive';\n\\q\n";
	eval { $victim->finish; 1 } or $victim->kill_kill;
	like($vout, qr/^alive$/m,
		'stopped: the session carries on once released');
}

# ---------------------------------------------------------------------
# 8. a dead-end backend: refused during a smart shutdown
# ---------------------------------------------------------------------
{
	# A superuser session over the Unix socket (not counted) keeps the
	# server up and reads as regress_plain and as regress_monitor.
	my $s = $node->background_psql('postgres');
	my $read_as = sub {
		my ($role, $sql) = @_;
		my $out = $s->query_safe("SET ROLE $role; $sql; RESET ROLE;");
		return $out;
	};
	my $cols = join ', ', @COUNTERS;
	my $plain_sql =
	  "SELECT row_to_json(t) FROM (SELECT $cols FROM ssl_renegotiate_totals) t";
	my $plain0 = $read_as->('regress_plain', $plain_sql);
	my $monitor_of = sub {
		my $t = JSON::PP::decode_json(
			$read_as->(
				'regress_monitor',
				'SELECT row_to_json(t) FROM (SELECT * FROM ssl_renegotiate_totals) t'
			));
		delete $t->{stats_reset};
		return $t;
	};
	my $m0 = $monitor_of->();
	$node->command_ok(
		[ 'pg_ctl', '-D', $node->data_dir, '-m', 'smart', '-W', 'stop' ],
		'dead end: a smart shutdown begins');

	my ($held_plain, $held_monitor, $killed, $pid);
	my $r = run_hostile_peer(
		$peer, $node,
		args => [ '--no-startup', 'silence' ],
		holds => {
			silent => sub {
				$held_plain = $read_as->('regress_plain', $plain_sql);
				$held_monitor = $monitor_of->();
				$pid = backend_of_client_port($node, $_[0]->{client_port});
				$killed = defined $pid && kill('TERM', $pid);
			}
		});
	ok($killed, 'dead end: the backend was found and signalled');
	is($held_plain, $plain0,
		'dead end: plain role: nothing while it was open');
	is(delta($m0, $held_monitor, 'connections'),
		1, 'dead end: pg_read_all_stats sees it live');
	ok($killed && wait_process_gone($pid), 'dead end: its backend is gone');
	is($read_as->('regress_plain', $plain_sql),
		$plain0, 'dead end: plain role: nothing after it ended');
	matches_kernel('dead end', $m0, $monitor_of->(), $r, 0);
	$s->quit;
	$node->stop('smart', fail_ok => 1);
}

unlike(
	slurp_file($node->logfile),
	qr/terminated by signal|server process .* was terminated/,
	'no backend crashed');

done_testing();
