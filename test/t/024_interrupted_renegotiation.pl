
# Copyright (c) 2026, ssl_renegotiate developers
#
# Interrupts that arrive while the server waits for a client to answer its
# TLS 1.2 renegotiation (ssl_renegotiate.tls12 = renegotiate, byte_limit =
# 64kB).  That wait runs inside PostgreSQL's communication layer (a
# wrapped pq_putmessage or pq_flush), where PostgreSQL itself processes no
# interrupt but a termination, in its own write.  The clients are slow to
# answer: psql copying to a pipe that the test stops reading (psql then
# stops reading its socket), and hostile_peer holding before it reads.
#
# What this proves:
#
#  1. A query cancel that arrives while the CommandComplete of a committed
#     INSERT waits for the client's handshake is not turned into an ERROR
#     for a statement that has committed: the client gets "INSERT 0 1", the
#     row is there, the session goes on.  (Before the fix the wait ran
#     CHECK_FOR_INTERRUPTS and the client got "canceling statement due to
#     user request" for a committed INSERT.)
#  2. pg_cancel_backend during a COPY TO, while the server waits in the
#     renegotiation: the COPY ends with 57014 at a normal point, what
#     arrived of it is an exact prefix of its rows, and in the same
#     session a following COPY TO arrives whole (checksum), and the
#     extension's byte counts equal the kernel's.
#  3. The same with statement_timeout.
#  4. pg_terminate_backend in the same wait: the backend ends at once, as
#     PostgreSQL ends a backend (FATAL 57P01 in the log), while the client
#     still reads nothing: nothing hangs.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use Digest::MD5;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $FILLER = 70;
my $ROWS = 200_000;    # about 22 MB: far more than the socket buffers

my $peer = build_hostile_peer();

my $node = new_tls_node('interrupted',
		conf => "ssl_renegotiate.byte_limit = '64kB'\n"
	  . "ssl_renegotiate.tls12 = renegotiate\n"
	  . "log_line_prefix = '%m [%p] %e '\n");
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION ssl_renegotiate; CREATE TABLE committed (x int)');

sub gen_select
{
	my ($rows) = @_;
	return
	  "SELECT i, md5(i::text) || repeat('x', $FILLER) FROM generate_series(1, $rows) i";
}

# Poll (bounded) until backend $pid waits for the client's handshake.
sub wait_in_renegotiation
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT lower(wait_event) = 'sslopenserver' FROM pg_stat_activity WHERE pid = $pid"
	);
}

# Are the lines of $text exactly rows 1..n of gen_select, for some n?
sub is_row_prefix
{
	my ($text) = @_;
	my $i = 0;
	my $fill = 'x' x $FILLER;
	for my $line (split /\n/, $text)
	{
		$i++;
		return 0 unless $line eq "$i\t" . Digest::MD5::md5_hex($i) . $fill;
	}
	return $i;
}

# ---------------------------------------------------------------------
# 1. a cancel while the CommandComplete of a committed INSERT waits
# ---------------------------------------------------------------------
{
	my ($cancelled, $idle_after);
	# the query itself crosses 64 kB received: the renegotiation starts on
	# the inbound path and the first send point, the CommandComplete after
	# the commit, waits for the client, which holds before reading
	my $r = run_hostile_peer(
		$peer, $node,
		args => [
			'--tls', '1.2', '--query', 'INSERT INTO committed VALUES (1)',
			'hold-before-reading', 70000
		],
		holds => {
			query_sent => sub {
				my $pid = $_[0]->{pid};
				ok(wait_in_renegotiation($pid),
					'INSERT: its CommandComplete waits for the client');
				$cancelled = $node->safe_psql('postgres',
					"SELECT pg_cancel_backend($pid)");
				$idle_after = $node->poll_query_until('postgres',
					"SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $pid"
				);
			}
		});
	is($cancelled, 't', 'INSERT: cancel sent');
	ok($idle_after, 'INSERT: the backend went idle');
	is($r->{held_result}, 'ok',
		'INSERT: the client got the INSERT\'s success');
	unlike($r->{_out}, qr/server_error=/, 'INSERT: and no error');
	is($r->{query_result} // $r->{result},
		'ok', 'INSERT: the session goes on');
	cmp_ok($r->{renegotiations_completed} // 0,
		'>=', 1, 'INSERT: the renegotiation completed');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM committed'),
		'1', 'INSERT: the row was committed');
}

# ---------------------------------------------------------------------
# 2-4. psql in COPY TO, its output left unread
# ---------------------------------------------------------------------
my ($in, $out, $err) = ('', '', '');
my $psql = IPC::Run::start(
	[
		'psql', '-XAtq',
		'-v', 'ON_ERROR_STOP=0',
		'-v', 'VERBOSITY=verbose',
		'-d', tls_connstr($node, tls => '1.2')
	],
	'<',
	\$in,
	'>',
	\$out,
	'2>',
	\$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

# Send psql some commands; with $marker, pump until it printed it.
sub psql_send
{
	my ($cmds, $marker) = @_;
	$in .= $cmds;
	$psql->pump_nb while length($in) > 0;
	return unless defined $marker;
	$psql->pump until $out =~ /^\Q$marker\E$/m;
	return;
}

psql_send("SELECT pg_backend_pid();\n\\echo ready\n", 'ready');
my ($pid) = $out =~ /^(\d+)$/m;
ok($pid, "psql session, backend $pid");

# Start a COPY TO of $ROWS rows to psql's stdout, leave it unread until the
# backend waits for the renegotiation, do $interrupt, then read it all.
# Returns what arrived of the COPY.
sub interrupted_copy
{
	my ($name, $interrupt, $prelude) = @_;
	$out = '';
	$err = '';
	psql_send(($prelude // '')
		. "\\copy ("
		  . gen_select($ROWS)
		  . ") to stdout\n"
		  . "\\echo done\n");
	ok(wait_in_renegotiation($pid),
		"$name: the backend waits for the client");
	$interrupt->();
	$psql->pump until $out =~ /^done$/m;
	(my $copied = $out) =~ s/^done\n\z//m;
	return $copied;
}

# Then: the same session copies again, whole, and its counts are exact.
sub session_still_good
{
	my ($name) = @_;
	my $file = PostgreSQL::Test::Utils::tempdir . '/after.txt';
	$out = '';
	psql_send(
		"\\copy ("
		  . gen_select(20_000)
		  . ") to '$file'\n"
		  . "SELECT pg_backend_pid();\n\\echo done\n",
		'done');
	like($out, qr/^$pid$/m, "$name: the same backend serves the session");
	is( file_md5($file),
		series_copy_md5($node, 20_000, $FILLER),
		"$name: a following COPY TO arrives whole");
	ok(wait_idle($node, $pid), "$name: session idle");
	my ($krcv, $ksent) = kernel_tls_counts($node, $pid);
	my $row = activity_row($node, $pid);
	is($row->{bytes_sent}, $ksent, "$name: bytes_sent equals the kernel's");
	is($row->{bytes_received},
		$krcv, "$name: bytes_received equals the kernel's");
	return $row;
}

{
	my $pos = log_position($node);
	my $copied = interrupted_copy(
		'cancel',
		sub {
			is( $node->safe_psql(
					'postgres', "SELECT pg_cancel_backend($pid)"),
				't',
				'cancel: sent');
		});
	like(
		$err,
		qr/ERROR:  57014: canceling statement due to user request/,
		'cancel: the COPY ended with 57014');
	my $n = is_row_prefix($copied);
	ok($n > 0 && $n < $ROWS,
		"cancel: what arrived is rows 1..$n, exactly, then the error");
	like(
		log_since($node, $pos),
		qr/57014 ERROR:  canceling statement due to user request/,
		'cancel: logged as a plain cancel');
	my $row = session_still_good('cancel');
	cmp_ok($row->{rekeys_sent}, '>=', 2, 'cancel: renegotiations went on');
}

{
	my $pos = log_position($node);
	my $copied = interrupted_copy(
		'statement_timeout',
		sub {
			# it fires after 5 s, while the server still waits (10 s)
			my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
			usleep(100_000)
			  until log_since($node, $pos) =~ /statement timeout/
			  || time() > $deadline;
		},
		"SET statement_timeout = '5s';\n");
	like(
		$err,
		qr/ERROR:  57014: canceling statement due to statement timeout/,
		'statement_timeout: the COPY ended with 57014');
	my $n = is_row_prefix($copied);
	ok($n > 0 && $n < $ROWS,
		"statement_timeout: what arrived is rows 1..$n, exactly");
	psql_send("RESET statement_timeout;\n");
	session_still_good('statement_timeout');
}

{
	my $pos = log_position($node);
	$out = '';
	psql_send("\\copy (" . gen_select($ROWS) . ") to stdout\n");
	ok(wait_in_renegotiation($pid),
		'terminate: the backend waits for the client');
	is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"),
		't', 'terminate: sent');
	# nothing read from psql meanwhile
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'terminate: the backend ended while the client read nothing');
	like(
		log_since($node, $pos),
		qr/57P01 FATAL:  terminating connection due to administrator command/,
		'terminate: ended as PostgreSQL ends a backend (57P01)');
	$psql->finish;
	ok(is_row_prefix($out),
		'terminate: what arrived is an exact prefix of the rows');
}

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|TRAP|PANIC/, 'no crash');

$node->stop;
done_testing();
