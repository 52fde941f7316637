
# ssl_renegotiate_rekey(pid): an operator rotates one connection's keys.
#
# What this proves, with the limits off (byte_limit = 0), so that only the
# request rotates:
#
#  1. An idle TLS 1.3 session: the request is pending (rekey_requested,
#     rekey_requests = 1) until its next I/O; then both directions rotate,
#     and the client's own TLS library saw the server's KeyUpdate and sent
#     one of its own.  log_rekeys logs the request.
#  2. In the middle of a COPY TO and of a COPY FROM (psql, TLS 1.3): the
#     keys rotate during the transfer and every byte arrives (checksums).
#  3. TLS 1.2 under each ssl_renegotiate.tls12: "renegotiate" renegotiates
#     (both directions, the client saw it), "warn" carries on and counts
#     rekeys_skipped, "terminate" ends the session with its FATAL.
#  4. A walsender (pg_receivewal, TLS 1.3) rotates at its next keepalive.
#  5. Permissions as for pg_cancel_backend: a role without rights gets
#     42501; the backend's own role and pg_signal_backend may; a non-TLS
#     backend and a pid of no backend get false with a WARNING.
#  6. The call never waits for the backend.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use Digest::MD5 qw(md5_hex);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $peer = build_hostile_peer();

my $node = new_tls_node(
	'rekey_on_demand',
	allows_streaming => 1,
	conf => "ssl_renegotiate.byte_limit = 0\n"
	  . "ssl_renegotiate.log_rekeys = on\n"
	  . "wal_sender_timeout = '4s'\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION ssl_renegotiate;
	CREATE ROLE regress_owner LOGIN;
	CREATE ROLE regress_other LOGIN;
	CREATE ROLE regress_signaller LOGIN IN ROLE pg_signal_backend;
	GRANT CREATE ON SCHEMA public TO regress_owner;
	CREATE TABLE copy_in (x text);
});

sub rekey
{
	my ($pid, $user) = @_;
	my $connstr =
	  $node->connstr('postgres') . ' user=' . ($user // 'postgres');
	my ($ret, $stdout, $stderr) = $node->psql(
		'postgres',
		"SELECT ssl_renegotiate_rekey($pid)",
		connstr => $connstr);
	return ($stdout, $stderr);
}

# ---------------------------------------------------------------------
# 1. an idle session, seen from both ends
# ---------------------------------------------------------------------
{
	my $pos = log_position($node);
	my ($pending, $before, $call);
	my $r = run_hostile_peer(
		$peer, $node,
		args => ['idle-then-query'],
		holds => {
			idle => sub {
				my $pid = $_[0]->{pid};
				$before = activity_row($node, $pid);
				$call = [ rekey($pid) ];
				$pending = activity_row($node, $pid);
			},
		});
	is($call->[0], 't', 'idle: the call returns true');
	is($pending->{rekey_requested}, 1, 'idle: the request is pending');
	is($pending->{rekey_requests}, 1, 'idle: one request counted');
	is( $pending->{rekeys_sent},
		$before->{rekeys_sent},
		'idle: nothing rotated before the next I/O');
	is($r->{query_result}, 'ok', 'idle: the session goes on');
	cmp_ok($r->{key_updates_received_total},
		'>=', 1,
		"idle: the client's TLS library read the server's KeyUpdate");
	cmp_ok($r->{key_updates_sent_total},
		'>=', 1, 'idle: ... and sent one of its own');
	like(
		log_since($node, $pos),
		qr/pid $r->{pid} was asked to rotate its keys \(request 1\)/,
		'idle: log_rekeys logs the request');
}

# the same, from the server's end, with the row read while still connected
{
	my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $r0 = activity_row($node, $pid);
	rekey($pid);
	$s->query_safe('SELECT 1');    # the server's KeyUpdate asks for one
	$s->query_safe('SELECT 2');    # which the client sends before this
	my $r1 = activity_row($node, $pid);
	cmp_ok($r1->{rekeys_sent}, '>', $r0->{rekeys_sent},
		'idle psql: the server rotated its key');
	cmp_ok(
		$r1->{rekeys_received},
		'>',
		$r0->{rekeys_received},
		'idle psql: the client rotated its key');
	is($r1->{rekey_requested}, 0, 'idle psql: the request is carried out');
	$s->quit;
}

# ---------------------------------------------------------------------
# 2. in the middle of COPY TO and COPY FROM
# ---------------------------------------------------------------------
my $ROWS = 300000;
# absolute: the server writes one of the files
my $tmp = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('copy'));

# psql running $sql in the background; $stdin (a scalar reference), if
# given, is its standard input, fed as the caller appends to it.
sub psql_copy_in_background
{
	my ($sql, $stdin) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'psql', '-X', '-q', '-At', '-d', tls_connstr($node, tls => '1.3'),
			'-c', "SET application_name = 'copier'",
			'-c', $sql
		],
		'<',
		$stdin // \undef,
		'>',
		\$out,
		'2>',
		\$err);
	my $pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'copier' AND query LIKE 'COPY%'"
	) or die 'the COPY did not start';
	$pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'copier'");
	return ($h, $pid, \$err);
}

{
	my $file = "$tmp/out.copy";
	my ($h, $pid, $err) = psql_copy_in_background(
		"\\copy (SELECT i, md5(i::text) || repeat('x', 200) FROM generate_series(1, $ROWS) i) to '$file'"
	);
	my $r0 = activity_row($node, $pid);
	my ($t) = rekey($pid);
	$h->finish;
	is($t, 't', 'COPY TO: the call returns true');
	is( file_md5($file),
		series_copy_md5($node, $ROWS, 200),
		'COPY TO: every byte arrived (checksum)');
	like(
		log_since($node, 0),
		qr/pid $pid was asked to rotate its keys/,
		'COPY TO: request logged');
	like(
		log_since($node, 0),
		qr/rotated the sending key of pid $pid after/,
		'COPY TO: the server rotated its sending key during the COPY');
	is($$err, '', 'COPY TO: psql saw no error');
}
{
	# Fed from here, half before the request and half after it: the COPY
	# cannot end before the request reaches it, and the client has 30 MB
	# left to send, during which libpq reads and so answers.
	my $half =
	  join('', map { md5_hex($_) . ('y' x 200) . "\n" } 1 .. $ROWS / 2);
	my $in = $half;
	my ($h, $pid, $err) =
	  psql_copy_in_background("\\copy copy_in from stdin", \$in);
	$h->pump while length $in;
	my ($t) = rekey($pid);
	$in .= $half;
	$h->finish;
	is($t, 't', 'COPY FROM: the call returns true');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM copy_in'),
		$ROWS, 'COPY FROM: every row stored');
	like(
		log_since($node, 0),
		qr/client of pid $pid rotated its sending key after/,
		'COPY FROM: the client rotated its sending key');
	is($$err, '', 'COPY FROM: psql saw no error');
}

# ---------------------------------------------------------------------
# 3. TLS 1.2 under each policy
# ---------------------------------------------------------------------
for my $mode ('renegotiate', 'warn', 'terminate')
{
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET ssl_renegotiate.tls12 = '$mode'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$node->poll_query_until('postgres',
		"SELECT current_setting('ssl_renegotiate.tls12') = '$mode'");
	my ($r0, $r1);
	my $r = run_hostile_peer(
		$peer, $node,
		args => [ '--tls', '1.2', 'idle-then-query' ],
		holds => {
			idle => sub {
				$r0 = activity_row($node, $_[0]->{pid});
				rekey($_[0]->{pid});
			},
			end => sub { $r1 = activity_row($node, $_[0]->{pid}) }
		});
	if ($mode eq 'terminate')
	{
		is($r->{result}, 'fatal', 'tls12 terminate: the session is ended');
		like(
			$r->{server_error},
			qr/FATAL: terminating connection because an operator asked to rotate its TLS 1\.2 keys/,
			'tls12 terminate: with a FATAL that says why');
		next;
	}
	is($r->{query_result}, 'ok', "tls12 $mode: the session goes on");
	if ($mode eq 'renegotiate')
	{
		cmp_ok($r1->{rekeys_sent}, '>', $r0->{rekeys_sent},
			'tls12 renegotiate: renegotiated');
		cmp_ok(
			$r1->{rekeys_received},
			'>',
			$r0->{rekeys_received},
			'tls12 renegotiate: both directions');
		cmp_ok($r->{renegotiations_completed},
			'>=', 1,
			"tls12 renegotiate: the client's TLS library renegotiated");
	}
	else
	{
		is($r1->{rekeys_sent}, $r0->{rekeys_sent},
			'tls12 warn: nothing rotated');
		is( $r1->{rekeys_skipped},
			$r0->{rekeys_skipped} + 1,
			'tls12 warn: counted as skipped');
		is($r->{renegotiations_completed},
			0, 'tls12 warn: the client saw no renegotiation');
	}
	is($r1->{rekey_requested}, 0, "tls12 $mode: nothing left pending");
}
$node->safe_psql('postgres', 'ALTER SYSTEM RESET ssl_renegotiate.tls12');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');

# ---------------------------------------------------------------------
# 4. a walsender
# ---------------------------------------------------------------------
{
	my $waldir = PostgreSQL::Test::Utils::tempdir('receivewal');
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pg_receivewal',
			'-D',
			$waldir,
			'--no-loop',
			'-d',
			tls_connstr($node, tls => '1.3', application_name => 'receiver')
		],
		'<',
		\undef,
		'>',
		\$out,
		'2>',
		\$err);
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_replication WHERE application_name = 'receiver' AND state = 'streaming'"
	) or die 'pg_receivewal did not stream';
	my $walpid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_replication WHERE application_name = 'receiver'"
	);
	my $r0 = activity_row($node, $walpid);
	rekey($walpid);
	$node->safe_psql('postgres', 'CREATE TABLE w AS SELECT 1 AS i');
	ok( $node->poll_query_until(
			'postgres',
			"SELECT rekeys_sent > $r0->{rekeys_sent} AND NOT rekey_requested FROM ssl_renegotiate_activity WHERE pid = $walpid"
		),
		'walsender: rotated at its next I/O');
	$h->kill_kill;
}

# ---------------------------------------------------------------------
# 5. permissions and bad pids
# ---------------------------------------------------------------------
{
	my $s = background_tls_psql($node,
		tls_connstr($node, tls => '1.3', user => 'regress_owner'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my ($out, $err) = rekey($pid, 'regress_other');
	like(
		$err,
		qr/permission denied to rotate the TLS keys of this process/,
		'another role without rights: refused');
	my ($ret, $o, $e) = $node->psql(
		'postgres',
		"SELECT ssl_renegotiate_rekey($pid)",
		connstr => $node->connstr('postgres') . ' user=regress_other',
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($e, qr/42501/, 'another role without rights: SQLSTATE 42501');
	($out) = rekey($pid, 'regress_owner');
	is($out, 't', "the backend's own role may");
	($out) = rekey($pid, 'regress_signaller');
	is($out, 't', 'a member of pg_signal_backend may');
	$s->quit;

	my $plain = $node->background_psql('postgres');
	my $plain_pid = $plain->query_safe('SELECT pg_backend_pid()');
	($out, $err) = rekey($plain_pid);
	is($out, 'f', 'a backend without TLS: false');
	like(
		$err,
		qr/WARNING:  PID $plain_pid is not a backend on a TLS connection/,
		'a backend without TLS: the WARNING says why');
	$plain->quit;
	($out, $err) = rekey(2147483647);
	is($out, 'f', 'no such pid: false');
	like(
		$err,
		qr/is not a PostgreSQL backend process/,
		'no such pid: the WARNING says why');
}

# ---------------------------------------------------------------------
# 6. the call never waits for the backend
# ---------------------------------------------------------------------
{
	# a backend that waits for a lock does no I/O: the request must not wait
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('SELECT pg_advisory_lock(77)');
	my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_until(qr/^$/, "SELECT pg_advisory_lock(77);\n");
	$node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid"
	);
	my ($out) = rekey($pid);
	is($out, 't',
		'a backend busy with something else: the call returns at once');
	is(activity_row($node, $pid)->{rekey_requested},
		1, '... with the request pending');
	$locker->query_safe('SELECT pg_advisory_unlock(77)');
	$locker->quit;
	$s->quit;
}

done_testing();
