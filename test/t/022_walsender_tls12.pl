
# Walsenders under ssl_renegotiate.tls12 = renegotiate and limit = 64kB,
# streaming to pg_receivewal over TLS 1.2 and over TLS 1.3.
#
# What this proves, for each version:
#
#  1. The WAL arrives while the walsender passes the limit many times.  On
#     TLS 1.3 the walsender rotates its key (KeyUpdate).  On TLS 1.2 it is
#     never renegotiated: a walsender writes without blocking and reads its
#     standby's replies while a write may be pending, and OpenSSL cannot
#     run a handshake across a pending write.  It goes on as under "warn":
#     rekeys_skipped = 1, logged once, with the reason.
#  2. With its receiver stopped (SIGSTOP) while the walsender has WAL to
#     send, the walsender never blocks in a rotation: nothing it sends
#     passes a blocking safe point (PostgreSQL's putmessage_noblock calls
#     putmessage, which must not become a blocking one), so
#     wal_sender_timeout ends it while the receiver is still stopped, and
#     the time it spent in rotations stays far below one renegotiation wait
#     (10 s).  Before the fix a TLS 1.2 walsender waited 10 s at every
#     message.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $node = new_tls_node(
	'walsender12',
	allows_streaming => 1,
	conf => "ssl_renegotiate.byte_limit = 64kB\n"
	  . "ssl_renegotiate.tls12 = renegotiate\n"
	  . "wal_sender_timeout = '3s'\n"
	  . "shared_buffers = 128MB\n"
	  . "max_wal_size = 1GB\n");
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION ssl_renegotiate; CREATE TABLE w (i int, t text)');

sub streaming_walsender
{
	my ($tls) = @_;
	my $waldir = PostgreSQL::Test::Utils::tempdir('receivewal');
	my $connstr =
	  tls_connstr($node, tls => $tls, application_name => "receivewal$tls");
	my ($out, $err) = ('', '');
	my $receiver = IPC::Run::start(
		[ 'pg_receivewal', '-D', $waldir, '-d', $connstr, '--no-loop', '-v' ],
		'<', \undef, '>', \$out, '2>', \$err);
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_replication WHERE application_name = 'receivewal$tls' AND state = 'streaming'"
	  )
	  or do
	{
		$receiver->pump_nb;
		die "pg_receivewal did not start streaming: $err";
	};
	my $walpid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_replication WHERE application_name = 'receivewal$tls'"
	);
	return ($receiver, $walpid);
}

for my $tls ('1.2', '1.3')
{
	my $pos0 = -s $node->logfile;
	my ($receiver, $walpid) = streaming_walsender($tls);
	is( $node->safe_psql(
			'postgres', "SELECT version FROM pg_stat_ssl WHERE pid = $walpid"
		),
		"TLSv$tls",
		"TLS $tls: the walsender runs on TLS $tls");

	# 1. streaming past the limit
	$node->safe_psql('postgres',
		q{INSERT INTO w SELECT i, repeat('x', 200) FROM generate_series(1, 10000) i}
	);
	my $lsn =
	  $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	ok( $node->poll_query_until(
			'postgres',
			"SELECT write_lsn >= '$lsn' FROM pg_stat_replication WHERE pid = $walpid"
		),
		"TLS $tls: the receiver has the WAL");
	my $row = activity_row($node, $walpid);
	if ($tls eq '1.3')
	{
		cmp_ok($row ? $row->{rekeys_sent} : 0,
			'>=', 10,
			'TLS 1.3: the walsender rotated its key while streaming');
	}
	else
	{
		is($row && $row->{rekeys_sent},
			0, 'TLS 1.2: the walsender was not renegotiated');
		is($row && $row->{rekeys_skipped},
			1, 'TLS 1.2: ... and counted the limit as skipped');
		like(
			slurp_file($node->logfile, $pos0),
			qr/TLS 1\.2 walsender of pid $walpid reached ssl_renegotiate\.byte_limit and goes on under its current keys/,
			'TLS 1.2: logged, with the reason');
	}
	is($row && $row->{rekey_failures}, 0, "TLS $tls: no failed rotation");

	# 2. the receiver stopped
	my $t0 = totals_row($node);
	my $pos = -s $node->logfile;
	my $receiver_pid = $receiver->{KIDS}[0]{PID};
	kill 'STOP', $receiver_pid or die "cannot stop pg_receivewal: $!";

	# WAL to send: far more than the limit and than the socket buffers
	$node->safe_psql('postgres',
		q{INSERT INTO w SELECT i, repeat('y', 500) FROM generate_series(1, 40000) i}
	);

	my $ended = $node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT 1 FROM ssl_renegotiate_activity WHERE pid = $walpid)"
	);
	my $log = slurp_file($node->logfile, $pos);
	ok($ended,
		"TLS $tls: the walsender ended while its receiver was stopped");
	like(
		$log,
		qr/terminating walsender process due to replication timeout/,
		"TLS $tls: wal_sender_timeout ended it");
	my $t1 = totals_row($node);
	my $rekey_ms = $t1->{rekey_time} - $t0->{rekey_time};
	note
	  "TLS $tls: the walsender spent $rekey_ms ms in rotations with its receiver stopped";
	cmp_ok($rekey_ms, '<', 1000,
		"TLS $tls: no time spent waiting for the stopped receiver");
	unlike(
		$log,
		qr/SSL error|TLS renegotiation failed|terminated by signal/,
		"TLS $tls: no TLS error, no crash");

	kill 'CONT', $receiver_pid;
	$receiver->finish;
}

done_testing();
