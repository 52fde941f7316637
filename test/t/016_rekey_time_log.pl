
# Copyright (c) 2026, ssl_renegotiate developers
#
# One truth for the cost of a rotation: with ssl_renegotiate.log_rekeys on,
# the "in X ms" of the "rotated the sending key" lines of a session add up
# to the growth of its rekey_time column, on TLS 1.3 (KeyUpdates) and on
# TLS 1.2 (renegotiations, tls12 = renegotiate), during a COPY TO with a
# new key every 64 kB.  Both come from one measurement: the time the
# server spends performing its rotations, including, for a renegotiation,
# its wait for the client's half of the handshake.  (Before the fix a
# KeyUpdate's line stopped its clock in OpenSSL's message callback, once
# the message was written but before the new key was derived, most of the
# cost; a renegotiation's lines said 0 ms.)
#
# Also: one line per rotation (none dropped), and the client's lines say
# how long after our request its key changed.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $ROWS = 50_000;    # about 5.5 MB: some 80 rotations

my $node = new_tls_node('rekey_time',
		conf => "ssl_renegotiate.byte_limit = '64kB'\n"
	  . "ssl_renegotiate.tls12 = renegotiate\n"
	  . "ssl_renegotiate.log_rekeys = on\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

for my $tls ('1.3', '1.2')
{
	my $s = background_tls_psql($node, tls_connstr($node, tls => $tls));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	ok(wait_idle($node, $pid), "TLS $tls: session idle");
	my $before = activity_row($node, $pid);
	my $pos = -s $node->logfile;

	$s->query_safe(
		"\\copy (SELECT i, repeat('x', 100) FROM generate_series(1, $ROWS) i) TO '/dev/null'"
	);
	# the last lines are written at the next safe point
	$s->query_safe('SELECT 1');
	ok(wait_idle($node, $pid), "TLS $tls: idle after the COPY");
	my $after = activity_row($node, $pid);
	$s->quit;

	my $log = slurp_file($node->logfile, $pos);
	my @ours = $log =~
	  /ssl_renegotiate: rotated the sending key of pid \Q$pid\E after \d+ bytes in ([\d.]+) ms/g;
	my @theirs = $log =~
	  /ssl_renegotiate: client of pid \Q$pid\E rotated its sending key after \d+ bytes(?: \(unrequested\))?, ([\d.]+) ms after the request/g;
	my $sum = 0;
	$sum += $_ for @ours;
	my $grown = $after->{rekey_time} - $before->{rekey_time};
	my $rotations = $after->{rekeys_sent} - $before->{rekeys_sent};

	note
	  sprintf(
		'TLS %s: %d rotations; the lines add up to %.3f ms, rekey_time grew by %.3f ms',
		$tls, $rotations, $sum, $grown);
	cmp_ok($rotations, '>=', 40,
		"TLS $tls: the COPY rotated the server's key");
	is(scalar(@ours), $rotations,
		"TLS $tls: one \"rotated the sending key\" line per rotation");
	unlike(
		$log,
		qr/rekeys of pid \Q$pid\E were not logged/,
		"TLS $tls: no line dropped");
	cmp_ok($grown, '>', 0, "TLS $tls: rekey_time grew");
	# each line rounds to 1 us (%.3f ms); rekey_time counts whole us
	cmp_ok(
		abs($sum - $grown),
		'<=',
		0.0005 * @ours + 1e-6,
		"TLS $tls: the logged durations add up to rekey_time's growth");
	if ($tls eq '1.2')
	{
		is( scalar(@theirs),
			$after->{rekeys_received} - $before->{rekeys_received},
			'TLS 1.2: one client line per renegotiation');
		ok(!grep({ $_ <= 0 } @theirs),
			'TLS 1.2: each client line says how long after the request');
	}
}

$node->stop;
done_testing();
