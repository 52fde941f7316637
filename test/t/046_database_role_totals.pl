
# ssl_renegotiate_database_role_totals: one row per (database, role).
#
# What this proves, on a TLS node with two databases and two plain roles:
#
#  1. While five TLS 1.3 sessions are live (two of them for the same
#     database and role), each row a superuser reads equals the sum of
#     its sessions' own activity rows, connections included.  A plain role
#     sees the rows of its own role only; a member of pg_read_all_stats
#     sees them all.
#  2. After the sessions exit, each row is the same sum plus each
#     session's Terminate record (the last thing a backend reads before
#     exit); a plain role still reads its own role's rows only (other
#     roles' traffic is for pg_read_all_stats, live or not).  A physical walsender is
#     counted under dbid 0, with no datname.
#  3. The reset: of one database; of one (database, role) while a session
#     of it is live (afterwards the row holds only that session's later
#     traffic, which another plain role never sees); of everything (no rows, evicted 0, a new stats_reset).
#  4. A fast restart keeps the rows exactly, stats_reset included; an
#     immediate stop and start empties the table.
#  5. ssl_renegotiate.max_database_role_totals = 2: a clean restart with
#     four rows keeps the two with the most bytes and counts two evicted;
#     a new (database, role) evicts the one with the fewest bytes, and
#     the rows stay bounded.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

# psql's PQfinish() sends Terminate ('X' + int32 length) in one TLS 1.3
# record: 5 header + 5 message + 1 inner content type + 16 tag.  The backend
# exits on reading it (test/t/001_accounting.pl).
use constant TERMINATE_RECORD_TLS13 => 5 + 5 + 1 + 16;

my @COUNTERS = qw(bytes_sent bytes_received records_sent records_received);

# Five plain-role sessions stay open while other roles connect and while
# the backends of earlier psql calls may still be exiting: more than the
# 7 slots of Cluster.pm's max_connections = 10 that are not reserved.
my $node = new_tls_node(
	'role_totals',
	allows_streaming => 1,
	conf => "max_connections = 30\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION ssl_renegotiate;
	CREATE DATABASE regress_db1;
	CREATE DATABASE regress_db2;
	CREATE ROLE regress_alice LOGIN;
	CREATE ROLE regress_bob LOGIN;
	CREATE ROLE regress_monitor LOGIN IN ROLE pg_read_all_stats;
});

# The rows as $user reads them over the Unix socket (not TLS: the reading
# adds nothing), keyed "datname/usename".
sub rows_as
{
	my ($user) = @_;
	my $json = $node->safe_psql(
		'postgres', q{
		SELECT coalesce(json_object_agg(coalesce(datname, '-') || '/' || usename,
		                                row_to_json(t)), '{}')
		FROM ssl_renegotiate_database_role_totals t
		WHERE usename LIKE 'regress\_%' OR dbid = 0},
		connstr => $node->connstr('postgres') . " user=$user");
	return JSON::PP::decode_json($json);
}

sub info
{
	return query_row_hash($node,
		'SELECT * FROM ssl_renegotiate_database_role_totals_info');
}

# A TLS 1.3 session of $user on $db that sent $n bytes of result; returns
# (session, pid).
sub session
{
	my ($db, $user, $n) = @_;
	my $s = background_tls_psql($node,
		tls_connstr($node, tls => '1.3', dbname => $db, user => $user));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe("SELECT repeat('x', $n)");
	ok(wait_idle($node, $pid), "$db/$user: session $pid idle");
	return ($s, $pid);
}

sub key_of { my ($db, $user) = @_; return "$db/$user"; }

# ---------------------------------------------------------------------
# 1. live sessions
# ---------------------------------------------------------------------
my @SESSIONS = (
	[ 'regress_db1', 'regress_alice', 100_000 ],
	[ 'regress_db1', 'regress_alice', 30_000 ],
	[ 'regress_db1', 'regress_bob', 200_000 ],
	[ 'regress_db2', 'regress_alice', 50_000 ],
	[ 'regress_db2', 'regress_bob', 10_000 ],);
my (@s, %pids, %sum);
for my $spec (@SESSIONS)
{
	my ($s, $pid) = session(@$spec);
	push @s, $s;
	push @{ $pids{ key_of(@$spec[ 0, 1 ]) } }, $pid;
}
for my $key (keys %pids)
{
	$sum{$key}{connections} = scalar @{ $pids{$key} };
	for my $pid (@{ $pids{$key} })
	{
		my $a = activity_row($node, $pid);
		$sum{$key}{$_} += $a->{$_} for @COUNTERS;
	}
}

my $super = rows_as('postgres');
is_deeply(
	[ sort keys %$super ],
	[ sort keys %sum ],
	'live: a superuser sees one row per (database, role)'
) or diag explain $super;
for my $key (sort keys %sum)
{
	is($super->{$key}{$_},
		$sum{$key}{$_}, "live: $key $_ == sum of its sessions")
	  for 'connections', @COUNTERS;
}
cmp_ok($super->{'regress_db1/regress_bob'}{bytes_sent},
	'>=', 200_000, 'live: regress_db1/regress_bob carries its 200 kB');

is_deeply(
	[ sort keys %{ rows_as('regress_alice') } ],
	[ 'regress_db1/regress_alice', 'regress_db2/regress_alice' ],
	'live: regress_alice sees the rows of her own sessions only');
is_deeply(
	[ sort keys %{ rows_as('regress_bob') } ],
	[ 'regress_db1/regress_bob', 'regress_db2/regress_bob' ],
	'live: regress_bob sees the rows of his own sessions only');
is_deeply(rows_as('regress_monitor'),
	$super, 'live: pg_read_all_stats sees what a superuser sees');

# ---------------------------------------------------------------------
# 2. exited sessions
# ---------------------------------------------------------------------
$_->quit for @s;
ok(wait_backends_gone($node, map { @$_ } values %pids),
	'all five sessions exited');
my $exited = rows_as('postgres');
for my $key (sort keys %sum)
{
	my $n = $sum{$key}{connections};
	my $r = $exited->{$key};
	is($r->{connections}, $n, "exited: $key connections == $n");
	is( $r->{bytes_sent},
		$sum{$key}{bytes_sent},
		"exited: $key bytes_sent == sum");
	is( $r->{records_sent},
		$sum{$key}{records_sent},
		"exited: $key records_sent == sum");
	is( $r->{bytes_received},
		$sum{$key}{bytes_received} + $n * TERMINATE_RECORD_TLS13,
		"exited: $key bytes_received == sum + $n Terminate records");
	is( $r->{records_received},
		$sum{$key}{records_received} + $n,
		"exited: $key records_received == sum + $n");
}
is_deeply(
	rows_as('regress_alice'),
	{ map { $_ => $exited->{$_} } grep { m{/regress_alice$} } keys %$exited },
	'exited: a plain role reads the rows of its own role only, whole');
is_deeply(rows_as('regress_monitor'),
	$exited, 'exited: pg_read_all_stats reads every row');

# a physical walsender: no database
$node->safe_psql('postgres', 'IDENTIFY_SYSTEM',
	connstr => tls_connstr($node, tls => '1.3', replication => 'true'));
$node->poll_query_until('postgres',
	'SELECT EXISTS (SELECT 1 FROM ssl_renegotiate_database_role_totals WHERE dbid = 0)'
) or die 'the walsender was not folded in';
my $walsender = query_row_hash($node,
	'SELECT * FROM ssl_renegotiate_database_role_totals WHERE dbid = 0');
ok( !defined $walsender->{datname}
	  && $walsender->{usename} eq 'postgres'
	  && $walsender->{connections} == 1
	  && $walsender->{bytes_sent} > 0,
	'a physical walsender is counted under dbid 0, datname NULL'
) or diag explain $walsender;

# ---------------------------------------------------------------------
# 3. reset
# ---------------------------------------------------------------------
my $db1 = $node->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname = 'regress_db1'});
my $db2 = $node->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname = 'regress_db2'});
$node->safe_psql('postgres',
	"SELECT ssl_renegotiate_reset_database_role_totals($db1)");
my $after = rows_as('postgres');
for my $key ('regress_db1/regress_alice', 'regress_db1/regress_bob')
{
	is_deeply(
		[ @{ $after->{$key} }{ 'connections', @COUNTERS } ],
		[ (0) x 5 ],
		"reset of regress_db1: $key is zero");
	ok( $after->{$key}{stats_reset} gt $exited->{$key}{stats_reset},
		"reset of regress_db1: $key has a new stats_reset");
}
is_deeply($after->{$_}, $exited->{$_},
	"reset of regress_db1: $_ is untouched")
  for 'regress_db2/regress_alice', 'regress_db2/regress_bob';

# a reset while a session of that (database, role) is live
{
	my ($s, $pid) = session('regress_db2', 'regress_bob', 20_000);
	$node->safe_psql('postgres',
		"SELECT ssl_renegotiate_reset_database_role_totals($db2, 'regress_bob'::regrole)"
	);
	my $at_reset = activity_row($node, $pid);
	my $r = rows_as('postgres')->{'regress_db2/regress_bob'};
	is_deeply(
		[ @{$r}{ 'connections', @COUNTERS } ],
		[ (0) x 5 ],
		'reset with a live session: the row is zero at once');
	$s->query_safe("SELECT repeat('y', 40000)");
	ok(wait_idle($node, $pid), 'the live session idle again');
	my $later = activity_row($node, $pid);
	$r = rows_as('postgres')->{'regress_db2/regress_bob'};
	is( $r->{$_},
		$later->{$_} - $at_reset->{$_},
		"reset with a live session: $_ is what it did since") for @COUNTERS;
	is($r->{connections}, 0,
		'reset with a live session: the session is not counted again');
	ok( !exists rows_as('regress_alice')->{'regress_db2/regress_bob'},
		'reset with a live session: another plain role sees nothing of it');
	$s->quit;
	ok(wait_backends_gone($node, $pid), 'the session exited');
	ok( !exists rows_as('regress_alice')->{'regress_db2/regress_bob'},
		'after its exit: still nothing for another plain role');
	$r = rows_as('regress_bob')->{'regress_db2/regress_bob'};
	is( $r->{bytes_sent},
		$later->{bytes_sent} - $at_reset->{bytes_sent},
		'after its exit: its role reads its traffic since the reset');
}

my $info0 = info();
$node->safe_psql('postgres',
	'SELECT ssl_renegotiate_reset_database_role_totals()');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM ssl_renegotiate_database_role_totals'),
	'0',
	'full reset: no rows');
my $info1 = info();
is($info1->{evicted}, 0, 'full reset: evicted 0');
ok($info1->{stats_reset} gt $info0->{stats_reset},
	'full reset: a new stats_reset');

# ---------------------------------------------------------------------
# 4. restarts
# ---------------------------------------------------------------------
# four rows, of distinct sizes: db1/alice > db1/bob > db2/alice > db2/bob
my @sizes = (
	[ 'regress_db1', 'regress_alice', 400_000 ],
	[ 'regress_db1', 'regress_bob', 300_000 ],
	[ 'regress_db2', 'regress_alice', 200_000 ],
	[ 'regress_db2', 'regress_bob', 100_000 ],);

sub four_rows
{
	my @p;
	for my $spec (@sizes)
	{
		my ($s, $pid) = session(@$spec);
		$s->quit;
		push @p, $pid;
	}
	ok(wait_backends_gone($node, @p), 'four sessions exited');
	return;
}
four_rows();
my $before = rows_as('postgres');
is(scalar(keys %$before), 4, 'before the restart: four rows');
# the README's example
like(
	$node->safe_psql(
		'postgres', q{
		SELECT datname, usename, connections,
		       pg_size_pretty(bytes_sent + bytes_received) AS traffic, stats_reset
		FROM ssl_renegotiate_database_role_totals
		ORDER BY bytes_sent + bytes_received DESC LIMIT 10}),
	qr/^regress_db1\|regress_alice\|1\|\d+ kB\|/,
	"the README's query: regress_db1/regress_alice moved the most bytes");
$node->restart;
is_deeply(rows_as('postgres'), $before,
	'fast restart: every row is kept, stats_reset included');
is_deeply(info(), $info1, 'fast restart: the info row is kept');

$node->stop('immediate');
$node->start;
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM ssl_renegotiate_database_role_totals'),
	'0',
	'immediate stop and start: no rows');
ok( info()->{stats_reset} gt $info1->{stats_reset},
	'immediate stop and start: a new stats_reset');

# ---------------------------------------------------------------------
# 5. eviction
# ---------------------------------------------------------------------
four_rows();
$node->append_conf('postgresql.conf',
	'ssl_renegotiate.max_database_role_totals = 2');
$node->restart;
is_deeply(
	[ sort keys %{ rows_as('postgres') } ],
	[ 'regress_db1/regress_alice', 'regress_db1/regress_bob' ],
	'restart with room for 2: the two rows with the most bytes are kept');
is(info()->{evicted}, 2, 'restart with room for 2: two evicted');

{
	my ($s, $pid) = session('regress_db2', 'regress_bob', 10);
	$s->quit;
	ok(wait_backends_gone($node, $pid),
		'a session of a new (database, role) exited');
}
is_deeply(
	[ sort keys %{ rows_as('postgres') } ],
	[ 'regress_db1/regress_alice', 'regress_db2/regress_bob' ],
	'a new (database, role) evicts the row with the fewest bytes');
is(info()->{evicted}, 3, 'the eviction is counted');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM ssl_renegotiate_database_role_totals'),
	'2',
	'the rows stay bounded by the setting');

$node->stop;
done_testing();
