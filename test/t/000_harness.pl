
# Self-test of the TAP harness (test/t/SslrTest.pm).  Needs no ssl_renegotiate
# build: the node runs without the extension.
#
# Run through the Makefile (make check-tap, or make check-all), or by hand, as the OS user
# that owns a copy of the tree (not root; initdb refuses root):
#
#   PATH=/usr/lib/postgresql/15/bin:$PATH \
#   PG_REGRESS=/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
#   TESTDIR=$PWD \
#   prove -I test/t -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl test/t/000_harness.pl
#
# (PG_REGRESS is needed: Cluster::init runs "pg_regress --config-auth".
# TESTDIR is optional; logs go to $TESTDIR/tmp_check/log, default ./tmp_check.)

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $node = new_tls_node('harness', no_preload => 1);
$node->start;

# Unix socket still works, and the server has TLS on
is($node->safe_psql('postgres', 'SHOW ssl'), 'on', 'ssl = on');
is($node->safe_psql('postgres', 'SHOW listen_addresses'),
	'127.0.0.1', 'listening on 127.0.0.1');

# psql over TCP with each TLS version; pg_stat_ssl of our own backend
for my $v ('1.2', '1.3')
{
	my $row = $node->safe_psql(
		'postgres',
		'SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
		connstr => tls_connstr($node, tls => $v));
	is($row, "t|TLSv$v", "psql over TLS $v: pg_stat_ssl says ssl=t, TLSv$v");
}

# plain TCP still possible (hostnossl) when asked for
is( $node->safe_psql(
		'postgres',
		'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
		connstr => tls_connstr($node, sslmode => 'disable')),
	'f',
	'sslmode=disable connects without TLS');

# the certificate verifies against our CA, for both names
for my $h ('localhost', '127.0.0.1')
{
	my $c = $node->{_sslr_certs}{ca_crt};
	my $connstr = tls_connstr(
		$node,
		sslmode => 'verify-full',
		sslrootcert => $c);
	$connstr =~ s/host=127\.0\.0\.1/host=$h/;
	is($node->safe_psql('postgres', 'SELECT 1', connstr => $connstr),
		'1', "sslmode=verify-full with host=$h");
}

# A background session over TLS 1.3 pulls ~5 MB with \copy
my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $pid = $s->query_safe('SELECT pg_backend_pid()');
like($pid, qr/^\d+$/, 'background TLS session has a backend pid');
my $ssl = query_row_hash($node, "SELECT * FROM pg_stat_ssl WHERE pid = $pid");
ok($ssl && $ssl->{ssl}, 'query_row_hash: background session uses TLS');
is($ssl->{version}, 'TLSv1.3', 'query_row_hash: ... version TLSv1.3');

# a NOTICE goes to stderr; bg_query returns it and leaves query_safe usable
my ($out, $err) = bg_query($s, q{DO $$BEGIN RAISE NOTICE 'hello'; END$$});
like($err, qr/NOTICE:  hello/, 'bg_query returns the NOTICE');
is($s->query_safe('SELECT 42'), '42', 'query_safe works after a NOTICE');

# before: only the handshake and a few small messages
my ($rcv0, $sent0, $bsent0) = kernel_counts($node, $pid);
ok(defined $rcv0, 'kernel_counts finds the backend socket')
  or diag(`ss -tinpH state established 2>&1`);
cmp_ok($sent0, '>', 0, 'some bytes sent before the COPY');
cmp_ok($sent0, '<', 100_000, 'but not much');

$s->query_safe(
	q{\copy (SELECT i, md5(i::text) || repeat('x', 60) FROM generate_series(1, 50000) i) to '/dev/null'}
);
ok(wait_idle($node, $pid), 'backend idle and socket quiet after COPY');

my ($rcv, $sent, $bsent, $retrans) = kernel_counts($node, $pid);
note "kernel: before rcv=$rcv0 acked=$sent0 sent="
  . ($bsent0 // 'n/a')
  . "; after rcv=$rcv acked=$sent sent="
  . ($bsent // 'n/a');
cmp_ok($sent - $sent0, '>', 5_000_000, 'more than 5 MB sent by the backend');
cmp_ok($sent, '<', 10_000_000, 'but not absurdly more');
cmp_ok($rcv, '>', $rcv0, 'bytes received grew (the COPY query)');
cmp_ok($rcv, '<', 100_000, 'received stays small');
is($bsent - $retrans,
	$sent,
	'bytes_sent less retransmitted bytes == bytes_acked once quiescent')
  if defined $bsent;
is_deeply(
	[ kernel_tls_counts($node, $pid) ],
	[ $rcv - 8, $sent - 1 ],
	'kernel_tls_counts: kernel counts less the SSLRequest exchange');

$s->quit;

# After the session ended, the socket is gone
my $gone;
for (1 .. 100)
{
	$gone = !defined kernel_socket_info($node, $pid);
	last if $gone;
	select(undef, undef, undef, 0.05);
}
ok($gone, 'socket gone after the session quit');

$node->stop;
done_testing();
