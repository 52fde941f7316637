
# PostgreSQL 19's server-side SNI (ssl_sni = on, pg_hosts.conf): each host
# name gets its own certificate, and the server never calls
# openssl_tls_init_hook.  Skipped before 19.
#
# What this proves, with two host names and a /no_sni/ line, byte_limit =
# 64kB:
#
#  1. A client naming each host (sslsni=1, verify-full against the test CA)
#     gets that host's certificate.
#  2. Each such connection, and one without SNI, is counted exactly (the
#     kernel's counts less the SSLRequest exchange) after a COPY of 50 MB
#     each way, and its keys rotate in both directions; the data arrive
#     intact.
#  3. PostgreSQL's "SNI is enabled; installed TLS init hook will be
#     ignored" warning does not appear: the extension installs no such hook.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $certs = make_certs();
my $node = new_tls_node(
	'sni',
	certs => $certs,
	conf => "ssl_renegotiate.byte_limit = 64kB\n");
if ($node->config_data('--version') !~ /PostgreSQL (\d+)/ || $1 < 19)
{
	plan skip_all => 'server-side SNI needs PostgreSQL 19 or later';
}

# a certificate per host name, signed by the test CA
my %host =
  map { $_ => make_host_cert($certs, $_) } ('alpha.test', 'beta.test');
$node->append_conf('pg_hosts.conf',
	"alpha.test $host{'alpha.test'}.crt $host{'alpha.test'}.key $certs->{ca_crt}\n"
	  . "beta.test $host{'beta.test'}.crt $host{'beta.test'}.key $certs->{ca_crt}\n"
	  . "/no_sni/ $certs->{server_crt} $certs->{server_key} $certs->{ca_crt}\n"
);
$node->append_conf('postgresql.conf', "ssl_sni = on\n");
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION ssl_renegotiate; CREATE TABLE sink (i int, s text)');

my $ROWS = 400000;    # about 50 MB of COPY text
my $tmp = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('sni'));
my $src = "$tmp/src.copy";
$node->safe_psql('postgres',
	"COPY (SELECT i, md5(i::text) || repeat('x', 90) FROM generate_series(1, $ROWS) i) TO '$src'"
);

for my $case ('alpha.test', 'beta.test', 'no SNI')
{
	my $extra =
	  $case eq 'no SNI'
	  ? 'sslsni=0'
	  : "host=$case hostaddr=127.0.0.1 sslsni=1 sslmode=verify-full sslrootcert=$certs->{ca_crt}";
	my $s = background_tls_psql($node,
		tls_connstr($node, tls => '1.3', extra => $extra));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	like($pid, qr/^\d+$/,
		$case eq 'no SNI'
		? "$case: connected"
		: "$case: connected with verify-full, so the server presented ${case}'s certificate"
	);
	my $out = "$tmp/out.$pid";
	$s->query_safe(
		"\\copy (SELECT i, md5(i::text) || repeat('x', 90) FROM generate_series(1, $ROWS) i) to '$out'"
	);
	$s->query_safe("\\copy sink from '$src'");
	ok(wait_idle($node, $pid), "$case: idle");
	my ($krcv, $ksent) = kernel_tls_counts($node, $pid);
	my $row = activity_row($node, $pid);
	is_deeply(
		[ $row->{bytes_received}, $row->{bytes_sent} ],
		[ $krcv, $ksent ],
		"$case: counts equal the kernel's less the SSLRequest exchange ($row->{bytes_received} received, $row->{bytes_sent} sent)"
	);
	cmp_ok($row->{rekeys_sent}, '>=', 100,
		"$case: the server's key rotated ($row->{rekeys_sent})");
	cmp_ok($row->{rekeys_received},
		'>=', 1, "$case: the client's key rotated ($row->{rekeys_received})");
	is( file_md5($out),
		series_copy_md5($node, $ROWS, 90),
		"$case: COPY TO intact");
	$s->quit;
	is($node->safe_psql('postgres', 'SELECT count(*) FROM sink'),
		$ROWS, "$case: COPY FROM stored every row");
	$node->safe_psql('postgres', 'TRUNCATE sink');
}

unlike(
	slurp_file($node->logfile),
	qr/installed TLS init hook will be ignored/,
	"no warning about an init hook: the extension installs none");

done_testing();
