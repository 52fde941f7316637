
# The totals across restarts.
#
# What this proves:
#
#  1. A fast restart and a smart stop + start keep the totals exactly,
#     stats_reset included; the file that carried them is gone once read.
#  2. An immediate stop + start starts them again from zero, with a new
#     stats_reset (so does a crash restart: t/042_faults.pl).
#  3. A file that is truncated, of another format, or whose checksum does
#     not match is ignored, with a LOG line that says which, and the totals
#     start from zero; the server starts normally.
#
# Run as the OS user owning the tree (see t/000_harness.pl).

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
		$node->safe_psql('postgres', "SELECT repeat('x', 50000)",
			connstr => tls_connstr($node, tls => $tls));
	}
	return;
}

sub totals { my $t = totals_row($node); return [ @{$t}{@COLUMNS} ]; }

# 1. clean restarts
traffic();
my $before = totals();
cmp_ok($before->[0], '>=', 2, 'traffic before the restart is counted');
$node->restart;
is_deeply(totals(), $before, 'fast restart: the totals are kept, stats_reset too');
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
is_deeply([ @{$t}{ @COLUMNS[ 0 .. 7 ] } ], [ (0) x 8 ],
	'immediate stop and start: the totals start from zero');
isnt($t->{stats_reset}, $reset0, 'immediate stop and start: a new stats_reset');

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
	like(slurp_file($node->logfile, $pos),
		qr/LOG:  ssl_renegotiate: ignoring the totals saved in "pg_stat\/ssl_renegotiate\.stat": \Q$reason\E/,
		"$what: ignored, with a LOG line that says so");
	my $t = totals_row($node);
	is_deeply([ @{$t}{ @COLUMNS[ 0 .. 7 ] } ], [ (0) x 8 ],
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

damaged('truncated file', sub { rewrite(sub { substr($_[0], 0, 20) }) },
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
		rewrite(sub { my $d = shift; substr($d, 20, 1) = chr(ord(substr($d, 20, 1)) ^ 0xff); $d });
	},
	'its checksum does not match');

is($node->safe_psql('postgres', 'SELECT 1', connstr => tls_connstr($node)),
	'1', 'the server works after all of it');

done_testing();
