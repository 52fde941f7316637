
# ssl_renegotiate_database_role_totals: the rows of dropped roles and
# databases go, and a statistics file with a (database, role) twice is
# refused.
#
# What this proves, on a TLS node:
#
#  1. DROP ROLE of a role that had traffic: its rows are gone as
#     pg_read_all_stats reads them, and the cluster totals are unchanged
#     (they count apart).  A DROP ROLE rolled back, whole or to a
#     savepoint, keeps the row; a reader inside the dropping transaction
#     does not see it, and does not purge it for good.
#  2. DROP ROLE while a session of that role is live: when the session
#     exits later, no row comes back.
#  3. DROP DATABASE: its rows are gone, the cluster totals unchanged.
#  4. max_database_role_totals = 2, full with a small live pair and a big
#     pair whose role is then dropped: a new pair takes the dead pair's
#     place; nothing is evicted (today's table kept the dead pair, the
#     "most used", and evicted the live one).
#  5. A role dropped while the library was not loaded: after a restart
#     with it, that role's rows, brought back by the statistics file, are
#     gone before anything is evicted for them.
#  6. A statistics file holding one (database, role) twice (CRC right) is
#     ignored whole, with a LOG line: no rows, cluster totals from zero.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my @TOTALS = qw(connections bytes_sent bytes_received records_sent
  records_received stats_reset);

my $node = new_tls_node('role_dead');
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION ssl_renegotiate;
	CREATE ROLE regress_monitor LOGIN IN ROLE pg_read_all_stats;
	CREATE ROLE regress_alice LOGIN;
});
my $file = $node->data_dir . '/pg_stat/ssl_renegotiate.stat';

sub oid_of_role
{
	return $node->safe_psql('postgres',
		"SELECT oid FROM pg_roles WHERE rolname = '$_[0]'");
}

# The rows as pg_read_all_stats reads them, keyed "dbid/userid" (a dropped
# object's name would be NULL).
sub rows
{
	my $json = $node->safe_psql(
		'postgres', q{
		SELECT coalesce(json_object_agg(dbid || '/' || userid, row_to_json(t)), '{}')
		FROM ssl_renegotiate_database_role_totals t},
		connstr => $node->connstr('postgres') . ' user=regress_monitor');
	return JSON::PP::decode_json($json);
}

sub rows_of_role
{
	my ($userid) = @_;
	my $r = rows();
	return scalar grep { m{/$userid$} } keys %$r;
}

sub totals { my $t = totals_row($node); return [ @{$t}{@TOTALS} ]; }

sub info
{
	return query_row_hash($node,
		'SELECT * FROM ssl_renegotiate_database_role_totals_info');
}

# A TLS 1.3 session of $user on $db that receives $n bytes of result, and
# has exited (folded) when this returns.
sub traffic
{
	my ($db, $user, $n) = @_;
	my ($pid) = split(
		/\|/,
		$node->safe_psql(
			$db,
			"SELECT pg_backend_pid(), repeat('x', $n)",
			connstr =>
			  tls_connstr($node, tls => '1.3', dbname => $db, user => $user))
	);
	ok(wait_backends_gone($node, $pid), "$db/$user: session $pid exited");
	return;
}

# ---------------------------------------------------------------------
# 1. DROP ROLE
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE ROLE regress_gone LOGIN');
my $gone = oid_of_role('regress_gone');
traffic('postgres', 'regress_gone', 100_000);
is(rows_of_role($gone), 1, 'drop role: the role has its row');
my $before = totals();
$node->safe_psql('postgres', 'DROP ROLE regress_gone');
is(rows_of_role($gone), 0, 'drop role: its row is gone');
is_deeply(totals(), $before, 'drop role: the cluster totals are unchanged');

# rolled back: the row stays
$node->safe_psql('postgres', 'CREATE ROLE regress_kept LOGIN');
my $kept = oid_of_role('regress_kept');
traffic('postgres', 'regress_kept', 50_000);
my ($kept_key) = grep { m{/$kept$} } keys %{ rows() };
my $kept_row = rows()->{$kept_key};
is( $node->safe_psql(
		'postgres', qq{
		BEGIN;
		DROP ROLE regress_kept;
		SELECT count(*) FROM ssl_renegotiate_database_role_totals WHERE userid = $kept;
		ROLLBACK;}),
	'0',
	'drop role, in its transaction: the row is not shown');
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SAVEPOINT s;
	DROP ROLE regress_kept;
	ROLLBACK TO SAVEPOINT s;
	COMMIT;});
$node->safe_psql(
	'postgres', q{
	DO $$
	BEGIN
		DROP ROLE regress_kept;
		RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END
	$$;});
is_deeply(rows()->{$kept_key}, $kept_row,
	'drop role rolled back (whole, to a savepoint, in a block): the row is kept whole'
);

# ---------------------------------------------------------------------
# 2. DROP ROLE while a session of it is live
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE ROLE regress_live LOGIN');
my $live = oid_of_role('regress_live');
{
	my $s = background_tls_psql($node,
		tls_connstr($node, tls => '1.3', user => 'regress_live'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe("SELECT repeat('x', 200000)");
	$node->safe_psql('postgres', 'DROP ROLE regress_live');
	$s->query_safe("SELECT repeat('y', 100000)");
	$s->quit;
	ok(wait_backends_gone($node, $pid), 'the dropped role\'s session exited');
}
is(rows_of_role($live), 0,
	'a dropped role\'s live session folds nowhere at exit');

# ---------------------------------------------------------------------
# 3. DROP DATABASE
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE DATABASE regress_gonedb');
my $gonedb = $node->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname = 'regress_gonedb'});
traffic('regress_gonedb', 'regress_alice', 100_000);
is(scalar(grep { m{^$gonedb/} } keys %{ rows() }),
	1, 'drop database: it has its row');
$before = totals();
$node->safe_psql('postgres', 'DROP DATABASE regress_gonedb');
is(scalar(grep { m{^$gonedb/} } keys %{ rows() }),
	0, 'drop database: its row is gone');
is_deeply(totals(), $before,
	'drop database: the cluster totals are unchanged');

# ---------------------------------------------------------------------
# 4. eviction: a dead pair never outweighs a live one
# ---------------------------------------------------------------------
$node->append_conf('postgresql.conf',
	'ssl_renegotiate.max_database_role_totals = 2');
$node->restart;
$node->safe_psql(
	'postgres', q{
	SELECT ssl_renegotiate_reset_database_role_totals();
	CREATE ROLE regress_small LOGIN;
	CREATE ROLE regress_big LOGIN;
	CREATE ROLE regress_new LOGIN;
});
my ($small, $big, $new) =
  map { oid_of_role($_) } qw(regress_small regress_big regress_new);
traffic('postgres', 'regress_small', 10);
traffic('postgres', 'regress_big', 300_000);
$node->safe_psql('postgres', 'DROP ROLE regress_big');
# no read of the view in between: only the drop itself may purge
traffic('postgres', 'regress_new', 10);
is(info()->{evicted}, 0,
	'full table, one pair dropped: a new pair evicts nothing');
is_deeply(
	[ sort { $a <=> $b } map { (split m{/})[1] } keys %{ rows() } ],
	[ sort { $a <=> $b } $small, $new ],
	'full table: the live small pair is kept, the new one added');

# ---------------------------------------------------------------------
# 5. a role dropped while the library was not loaded
# ---------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
	SELECT ssl_renegotiate_reset_database_role_totals();
	CREATE ROLE regress_offline LOGIN;
	CREATE ROLE regress_after LOGIN;
});
my ($offline, $after) =
  map { oid_of_role($_) } qw(regress_offline regress_after);
traffic('postgres', 'regress_small', 10);
traffic('postgres', 'regress_offline', 300_000);
$node->stop;
ok(-s $file, 'the totals were written at the clean stop');
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$node->start;
$node->safe_psql('postgres', 'DROP ROLE regress_offline');
$node->stop;
ok(-s $file, 'a run without the library leaves the file alone');
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'ssl_renegotiate'");
$node->start;
# the first login (over TLS, before any read of the view) checks them
traffic('postgres', 'regress_after', 10);
is(info()->{evicted}, 0,
	'after the restart: the dropped role\'s row was gone before a new pair needed room'
);
is_deeply(
	[ sort { $a <=> $b } map { (split m{/})[1] } keys %{ rows() } ],
	[ sort { $a <=> $b } $small, $after ],
	'after the restart: the dropped role\'s row is gone, the live ones kept');

# ---------------------------------------------------------------------
# 6. a file with one (database, role) twice
# ---------------------------------------------------------------------
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

$node->stop;
{
	open(my $fh, '+<', $file) or die "cannot open $file: $!";
	binmode $fh;
	local $/;
	my $d = <$fh>;
	# format 2: the header (magic, format, sizes, totals, info, nentries
	# last), nentries entries, the CRC-32C
	my $entry_size = unpack('L', substr($d, 12, 4));
	my ($header, $n);
	for my $try (1 .. 10)
	{
		my $h = length($d) - 4 - $try * $entry_size;
		next if $h < 16 || unpack('q', substr($d, $h - 8, 8)) != $try;
		($header, $n) = ($h, $try);
		last;
	}
	die 'cannot parse the statistics file' unless defined $n;
	is($n, 2, 'the file holds two entries');
	my $first = substr($d, $header, $entry_size);
	my $body =
		substr($d, 0, $header - 8)
	  . pack('q', $n + 1)
	  . substr($d, $header, $n * $entry_size)
	  . $first;
	seek($fh, 0, 0);
	truncate($fh, 0);
	print $fh $body . pack('L', crc32c($body));
	close $fh;
}
my $pos = -s $node->logfile;
$node->start;
like(
	slurp_file($node->logfile, $pos),
	qr/LOG:  ssl_renegotiate: ignoring the totals saved in "pg_stat\/ssl_renegotiate\.stat": it holds database \d+, role \d+ twice/,
	'a (database, role) twice: the file is ignored, with a LOG line');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM ssl_renegotiate_database_role_totals'),
	'0',
	'a (database, role) twice: no rows');
is(totals_row($node)->{connections},
	0, 'a (database, role) twice: the cluster totals from zero');
ok(!-e $file, 'a (database, role) twice: the file is removed');

$node->stop;
done_testing();
