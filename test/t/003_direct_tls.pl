
# Direct TLS (PostgreSQL 17 and later: libpq's sslnegotiation=direct, ALPN
# "postgresql"): no SSLRequest comes before the handshake.
#
# What this proves, on 17 and later (skipped before):
#
#  1. A direct-TLS session is counted exactly: its bytes equal the
#     kernel's socket counts, with no SSLRequest exchange to take off.  A
#     session with the usual negotiation on the same server still equals
#     the kernel's counts less the 8 + 1 bytes of that exchange.
#  2. It rotates like any other: a COPY TO at byte_limit = 64kB rotates
#     the server's key, and the data arrive intact.
#  3. It has its row, and the totals count it.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $node =
  new_tls_node('direct_tls', conf => "ssl_renegotiate.byte_limit = 64kB\n");
$node->start;
if ($node->safe_psql('postgres', 'SHOW server_version_num') < 170000)
{
	plan skip_all => 'direct TLS needs PostgreSQL 17 or later';
}
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

my $ROWS = 20000;
my $tmp = PostgreSQL::Test::Utils::tempdir('direct');

for my $negotiation ('direct', 'postgres')
{
	my $connstr = tls_connstr(
		$node,
		tls => '1.3',
		extra => "sslnegotiation=$negotiation");
	my $s = background_tls_psql($node, $connstr);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $file = "$tmp/$negotiation.copy";
	$s->query_safe(
		"\\copy (SELECT i, md5(i::text) || repeat('x', 100) FROM generate_series(1, $ROWS) i) to '$file'"
	);
	ok(wait_idle($node, $pid), "$negotiation: session idle");
	my ($rcv, $acked) = kernel_counts($node, $pid);
	my $row = activity_row($node, $pid);
	ok($row, "$negotiation: the session has its row");
	my ($want_rcv, $want_sent) =
	  $negotiation eq 'direct'
	  ? ($rcv, $acked)
	  : ($rcv - SSL_REQUEST_CLIENT_BYTES, $acked - SSL_REQUEST_SERVER_BYTES);
	is_deeply(
		[ $row->{bytes_received}, $row->{bytes_sent} ],
		[ $want_rcv, $want_sent ],
		"$negotiation: counts equal the kernel's"
		  . (
			$negotiation eq 'direct'
			? ' exactly'
			: ' less the SSLRequest exchange')
		  . " ($row->{bytes_received} received, $row->{bytes_sent} sent)");
	cmp_ok($row->{rekeys_sent}, '>=', 10,
		"$negotiation: the server's key rotated during the COPY");
	is( file_md5($file),
		series_copy_md5($node, $ROWS, 100),
		"$negotiation: the COPY arrived intact");
	$s->quit;
}

cmp_ok(totals_row($node)->{connections}, '>=', 2, 'the totals count both');

done_testing();
