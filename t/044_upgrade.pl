
# ALTER EXTENSION ssl_renegotiate UPDATE from 1.0 to 1.1 with a TLS session
# open.
#
# What this proves:
#
#  1. Version 1.0's objects work with this library (its C functions are
#     versioned): a session reads its own 23-column row.
#  2. With that session still open, the update gives it the 1.1 objects at
#     once: the 26-column row (record_limit, rekey_requests,
#     rekey_requested) and ssl_renegotiate_rekey, which rotates that very
#     session's keys.
#  3. The counting went on across the update: the same row, growing.
#
# Run as the OS user owning the tree (see t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP ();
use SslrTest;

my $node = new_tls_node('upgrade', conf => "ssl_renegotiate.byte_limit = 0\n");
$node->start;
$node->safe_psql('postgres', "CREATE EXTENSION ssl_renegotiate VERSION '1.0'");

my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $pid = $s->query_safe('SELECT pg_backend_pid()');

my $row = $s->query_safe(
	"SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = $pid");
my $r10 = JSON::PP::decode_json($row);
is(scalar(keys %$r10), 23, '1.0: the session reads its own row of 23 columns');
cmp_ok($r10->{bytes_sent}, '>', 0, '1.0: with its counts');

$node->safe_psql('postgres', "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.1'");
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate'"),
	'1.1', 'updated to 1.1');

$row = $s->query_safe(
	"SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = $pid");
my $r11 = JSON::PP::decode_json($row);
is(scalar(keys %$r11), 26, '1.1: the same open session now reads 26 columns');
is($r11->{record_limit}, 16777216, '1.1: record_limit of its AES-GCM cipher');
is($r11->{rekey_requests}, 0, '1.1: no request yet');
cmp_ok($r11->{bytes_sent}, '>', $r10->{bytes_sent},
	'counting went on across the update');

is($s->query_safe("SELECT ssl_renegotiate_rekey($pid)"), 't',
	'1.1: ssl_renegotiate_rekey on the open session');
$s->query_safe('SELECT 1');
my $after = activity_row($node, $pid);
cmp_ok($after->{rekeys_sent}, '>=', 1, '1.1: its keys rotated');
is($after->{rekey_requests}, 1, '1.1: one request counted');
$s->quit;

done_testing();
