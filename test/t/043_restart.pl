
# The totals across restarts.
#
# What this proves:
#
#  1. A fast restart and a smart stop + start keep the totals exactly,
#     stats_reset included; the file that carried them is gone once read.
#  2. An immediate stop + start starts them again from zero, with a new
#     stats_reset (so does a crash restart: test/t/042_faults.pl).
#  3. A file that is truncated, of another format, or whose checksum does
#     not match is ignored, with a LOG line that says which, and the totals
#     start from zero; the server starts normally.
#  4. The file is of format 2 (since 1.2: the totals per database and role
#     follow the cluster's); a file of format 1, as 1.1 wrote it, is still
#     read: the totals are those it holds, and the totals per database and
#     role start empty (test/t/046_database_role_totals.pl tests format 2's).
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $node = new_tls_node('restart');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

my $file = $node->data_dir . '/pg_stat/ssl_renegotiate.stat';
my @COLUMNS = qw(connections bytes_sent bytes_received records_sent
  records_received rekeys_sent rekeys_received terminations stats_reset);

sub traffic
{
	for my $tls ('1.2', '1.3')
	{
		$node->safe_psql(
			'postgres',
			"SELECT repeat('x', 50000)",
			connstr => tls_connstr($node, tls => $tls));
	}
	# psql leaves once it has sent its Terminate; its backend folds that
	# last record into the totals when it reads it and exits, which may be
	# after the test's next read of them (27 bytes short, once on 18 in a
	# fresh root).  A backend leaves the activity view in the same step.
	$node->poll_query_until('postgres',
		'SELECT count(*) = 0 FROM ssl_renegotiate_activity')
	  or die 'the TLS sessions did not end';
	return;
}

sub totals { my $t = totals_row($node); return [ @{$t}{@COLUMNS} ]; }

# 1. clean restarts
traffic();
my $before = totals();
cmp_ok($before->[0], '>=', 2, 'traffic before the restart is counted');
$node->restart;
is_deeply(totals(), $before,
	'fast restart: the totals are kept, stats_reset too');
ok(!-e $file, 'fast restart: the file is removed once read');

traffic();
$before = totals();
$node->stop('smart');
ok(-s $file, 'smart stop: the totals are written');
$node->start;
is_deeply(totals(), $before, 'smart stop and start: the totals are kept');

# 2. an immediate stop
traffic();
my $reset0 = totals_row($node)->{stats_reset};
$node->stop('immediate');
ok(!-e $file, 'immediate stop: nothing is written');
$node->start;
my $t = totals_row($node);
is_deeply(
	[ @{$t}{ @COLUMNS[ 0 .. 7 ] } ],
	[ (0) x 8 ],
	'immediate stop and start: the totals start from zero');
isnt($t->{stats_reset}, $reset0,
	'immediate stop and start: a new stats_reset');

# 3. damaged files
sub damaged
{
	my ($what, $damage, $reason) = @_;
	traffic();
	$node->stop;
	ok(-s $file, "$what: the totals were written");
	$damage->();
	my $pos = -s $node->logfile;
	$node->start;
	like(
		slurp_file($node->logfile, $pos),
		qr/LOG:  ssl_renegotiate: ignoring the totals saved in "pg_stat\/ssl_renegotiate\.stat": \Q$reason\E/,
		"$what: ignored, with a LOG line that says so");
	my $t = totals_row($node);
	is_deeply(
		[ @{$t}{ @COLUMNS[ 0 .. 7 ] } ],
		[ (0) x 8 ],
		"$what: the totals start from zero");
	ok(!-e $file, "$what: the file is removed");
	return;
}

sub rewrite
{
	my ($edit) = @_;
	open(my $fh, '+<', $file) or die "cannot open $file: $!";
	binmode $fh;
	local $/;
	my $data = <$fh>;
	$data = $edit->($data);
	seek($fh, 0, 0);
	truncate($fh, 0);
	print $fh $data;
	close $fh;
	return;
}

damaged(
	'truncated file',
	sub {
		rewrite(sub { substr($_[0], 0, 20) });
	},
	'it is not of the expected size');
damaged(
	'another format',
	sub {
		rewrite(sub { my $d = shift; substr($d, 4, 4) = pack('L', 99); $d });
	},
	'it is of another format');
damaged(
	'checksum mismatch',
	sub {
		rewrite(
			sub {
				my $d = shift;
				substr($d, 20, 1) = chr(ord(substr($d, 20, 1)) ^ 0xff);
				$d;
			});
	},
	'its checksum does not match');

# 4. format 1, as written by 1.1: magic, format, size of the totals (and 4
# bytes of padding), the totals, their CRC-32C (and 4 bytes of padding)
sub crc32c
{
	my ($data) = @_;
	my $crc = 0xffffffff;
	for my $byte (unpack('C*', $data))
	{
		$crc ^= $byte;
		$crc = ($crc & 1) ? (($crc >> 1) ^ 0x82f63b78) : ($crc >> 1)
		  for 1 .. 8;
	}
	return $crc ^ 0xffffffff;
}

traffic();
$before = totals();
$node->stop;
rewrite(
	sub {
		my $d = shift;
		my ($magic, $format, $size) = unpack('LLL', $d);
		is($format, 2, 'the file is of format 2');
		my $v1 = pack('LLLL', $magic, 1, $size, 0) . substr($d, 16, $size);
		return $v1 . pack('LL', crc32c($v1), 0);
	});
$node->start;
is_deeply(totals(), $before, 'a format 1 file is read: the totals are kept');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM ssl_renegotiate_database_role_totals'),
	'0',
	'a format 1 file is read: no totals per database and role');
ok(!-e $file, 'a format 1 file is removed once read');

is($node->safe_psql('postgres', 'SELECT 1', connstr => tls_connstr($node)),
	'1', 'the server works after all of it');

done_testing();
