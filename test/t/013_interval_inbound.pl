
# ssl_renegotiate.interval while the server only receives: a long COPY FROM
# over TLS 1.3 from a client that answers the server's KeyUpdate requests
# promptly (test/t/peer/records.c, mode copy-answering: it reads without
# blocking after each row it sends).
#
# What this proves, with interval = 1s and limit = 0 (time only):
#
#  1. The received key keeps rotating once per interval for the whole
#     COPY, not only after the first interval: during 8 s of COPY FROM the
#     server asked for, and the client performed, at least one rotation per
#     two intervals, and never more than one per interval (plus one).
#  2. The rotations the server counts are the ones the client really
#     performed (its TLS library's count of KeyUpdates it wrote).
#  3. Every row arrived: the stored rows equal the rows sent.
#  4. The interval survives an ERROR: PostgreSQL's error recovery disarms
#     every timeout, and the extension sets its timer again (it learns of
#     the recovery from the communication layer's reset), so the first
#     I/O after the interval still rotates.
#
# The bounds are loose on purpose (half the intervals), so that a slow or
# loaded machine does not fail them; before the fix the count stopped at 1.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $SECONDS = 8;

my $peer = build_hostile_peer();

my $node = new_tls_node('interval_inbound',
	conf =>
	  "ssl_renegotiate.byte_limit = 0\nssl_renegotiate.interval = '1s'\n");
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION ssl_renegotiate; CREATE TABLE ia (x text)');

my $row;
my $r = run_hostile_peer(
	$peer, $node,
	args => [ '--table', 'ia', 'copy-answering', $SECONDS ],
	holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });

is($r->{copy_result}, 'ok', 'the COPY FROM completed');
is($r->{result}, 'ok', 'the session ended normally');
ok($row, 'activity row of the session after the COPY');

my $intervals = int($r->{copy_seconds} // 0);
my $received = $row ? $row->{rekeys_received} : 0;
note "COPY of $r->{copy_seconds} s: rekeys_received = $received, "
  . "the client sent $r->{key_updates_sent_total} KeyUpdates";

cmp_ok($intervals, '>=', $SECONDS, "the COPY lasted $SECONDS s or more");
cmp_ok($received, '>=', $intervals / 2,
	'received rotations keep pace with the interval (at least one per two intervals)'
);
cmp_ok(
	$received, '<=',
	$intervals + 1,
	'... and no more than one per interval');
ok( $received <= $r->{key_updates_sent_total}
	  && $received >= $r->{key_updates_sent_total} - 1,
	'the server counted the rotations the client performed (the last answer may come after the hold)'
);
is($node->safe_psql('postgres', 'SELECT count(*) FROM ia'),
	$r->{copy_rows_sent}, 'every row sent was stored');

# 4. after an ERROR
{
	my $s = background_tls_psql(
		$node,
		tls_connstr($node, tls => '1.3'),
		on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my (undef, $err) = bg_query($s, 'SELECT 1/0');
	like($err, qr/division by zero/, 'after an ERROR: the statement failed');
	my $before = activity_row($node, $pid)->{rekeys_sent};
	usleep(2_500_000);
	$s->query_safe('SELECT 1');
	my $after = activity_row($node, $pid)->{rekeys_sent};
	cmp_ok($after, '>', $before,
		'after an ERROR: the first I/O after the interval rotated the sending key'
	);
	$s->quit;
}

done_testing();
