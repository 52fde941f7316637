
# Every TLS 1.3 cipher suite OpenSSL offers, chosen with PostgreSQL 18's
# ssl_tls13_ciphers (skipped before 18).
#
# What this proves, for TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
# TLS_CHACHA20_POLY1305_SHA256 and TLS_AES_128_CCM_SHA256 (which clients do
# not offer by default: the hostile peer offers it):
#
#  1. The view's cipher column names the suite, and record_limit is its
#     confidentiality limit in force: 2^24 records for AES-GCM, 2^23 for
#     AES-CCM, none (NULL) for ChaCha20-Poly1305.
#  2. Rotation works on each: 60 rows of 10 kB at byte_limit = 64kB rotate
#     the server's key, and the client's TLS library saw the KeyUpdates.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $node = new_tls_node('tls13_ciphers',
	conf => "ssl_renegotiate.byte_limit = 64kB\n");
$node->start;
if ($node->safe_psql('postgres', 'SHOW server_version_num') < 180000)
{
	plan skip_all => 'ssl_tls13_ciphers needs PostgreSQL 18 or later';
}
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');
my $peer = build_hostile_peer();

my %limit = (
	TLS_AES_128_GCM_SHA256 => 16777216,
	TLS_AES_256_GCM_SHA384 => 16777216,
	TLS_CHACHA20_POLY1305_SHA256 => undef,
	TLS_AES_128_CCM_SHA256 => 8388608);

for my $suite (sort keys %limit)
{
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET ssl_tls13_ciphers = '$suite'");
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT current_setting('ssl_tls13_ciphers') = '$suite'")
	  or die "ssl_tls13_ciphers not reloaded";

	my $row;
	my $r = run_hostile_peer(
		$peer, $node,
		args => [
			'--ciphersuites', $suite, '--query',
			"SELECT repeat('x', 10000) FROM generate_series(1, 60)",
			'hold-before-reading', 1
		],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{cipher}, $suite, "$suite: negotiated");
	is($row && $row->{cipher}, $suite, "$suite: the view's cipher column");
	is($row && $row->{record_limit},
		$limit{$suite},
		"$suite: record_limit " . ($limit{$suite} // 'NULL (none)'));
	is($r->{held_result}, 'ok', "$suite: the 600 kB answer arrived");
	cmp_ok($row ? $row->{rekeys_sent} : 0,
		'>=', 3, "$suite: the server's key rotated");
	cmp_ok($r->{key_updates_received_total},
		'>=', 3, "$suite: ... as the client's TLS library saw");
}

done_testing();
