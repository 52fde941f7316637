# The limits in force on every row of ssl_renegotiate_activity: byte_limit,
# hard_limit (bytes), rekey_interval (an interval), each NULL when off, and
# tls12, as each backend sees its settings.
#
# What this proves:
#
#  1. A per-role (ALTER ROLE ... SET), a per-database (ALTER DATABASE ...
#     SET) and a per-role-in-database setting reach the rows of that role's
#     and that database's sessions, each in its own column and unit.
#  2. A session's own SET, SET LOCAL and RESET show in its own row at once,
#     and "off" is NULL, so that WHERE byte_limit IS NULL finds exactly the
#     sessions running without byte-based rotation.
#  3. After ALTER SYSTEM and pg_reload_conf, an idle session's row keeps its
#     values until its next I/O (PostgreSQL applies a reload between
#     commands), then shows the new ones; a database's setting still wins
#     over ALTER SYSTEM.
#  4. A role that may not see another role's row gets NULL for these
#     columns too, and its own values in its own row.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

use constant MB => 1024 * 1024;
use constant GB => 1024 * MB;

my $node = new_tls_node('limits',
		conf => "ssl_renegotiate.byte_limit = '1MB'\n"
	  . "ssl_renegotiate.hard_limit = 0\n"
	  . "ssl_renegotiate.interval = 0\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION ssl_renegotiate;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE DATABASE other;
ALTER ROLE alice SET ssl_renegotiate.byte_limit = '2MB';
ALTER ROLE alice SET ssl_renegotiate.interval = '1h';
ALTER DATABASE other SET ssl_renegotiate.hard_limit = '3GB';
ALTER DATABASE other SET ssl_renegotiate.tls12 = 'renegotiate';
ALTER ROLE bob IN DATABASE other SET ssl_renegotiate.interval = '30min';
});
$node->safe_psql('other', 'CREATE EXTENSION ssl_renegotiate');

my $limits_sql = q{SELECT concat_ws(' ', coalesce(byte_limit::text, 'NULL'),
  coalesce(hard_limit::text, 'NULL'), coalesce(rekey_interval::text, 'NULL'),
  coalesce(tls12, 'NULL')) FROM ssl_renegotiate_activity WHERE pid = };

sub limits_of
{
	my ($pid) = @_;
	return $node->safe_psql('postgres', $limits_sql . $pid);
}

my $alice = background_tls_psql($node,
	tls_connstr($node, user => 'alice', tls => '1.3'));
my $bob = background_tls_psql($node,
	tls_connstr($node, user => 'bob', dbname => 'other', tls => '1.2'));
my $su = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $a_pid = $alice->query_safe('SELECT pg_backend_pid()');
my $b_pid = $bob->query_safe('SELECT pg_backend_pid()');
my $c_pid = $su->query_safe('SELECT pg_backend_pid()');
my $superuser = $su->query_safe('SELECT current_user');

# 1. role, database, role in database
is( limits_of($a_pid),
	(2 * MB) . ' NULL 01:00:00 warn',
	"alice's row: the role's byte_limit and interval, the file's others");
is( limits_of($b_pid),
	(1 * MB) . ' ' . (3 * GB) . ' 00:30:00 renegotiate',
	"bob's row in other: the database's hard_limit and tls12, bob-in-other's interval"
);
is( limits_of($c_pid),
	(1 * MB) . ' NULL NULL warn',
	'the superuser: the file\'s');

# 2. a session's own settings, in its own row
my $own = $limits_sql . 'pg_backend_pid()';
$su->query_safe('SET ssl_renegotiate.byte_limit = 0');
is( $su->query_safe($own),
	'NULL NULL NULL warn',
	'SET byte_limit = 0: NULL in its own row');
is( $node->safe_psql(
		'postgres',
		'SELECT string_agg(pid::text, \',\') FROM ssl_renegotiate_activity WHERE byte_limit IS NULL'
	),
	$c_pid,
	'WHERE byte_limit IS NULL finds that session, and only it');
# the README's query
is( $node->safe_psql(
		'postgres', q{
-- sessions running without byte-based rotation, or with no hard limit
SELECT pid, usename, datname, byte_limit, hard_limit
FROM ssl_renegotiate_activity JOIN pg_stat_activity USING (pid)
WHERE byte_limit IS NULL OR hard_limit IS NULL
ORDER BY pid;
}),
	join(
		"\n",
		map { $_->[1] } sort { $a->[0] <=> $b->[0] } (
			[ $a_pid, "$a_pid|alice|postgres|" . (2 * MB) . '|' ],
			[ $c_pid, "$c_pid|$superuser|postgres||" ])),
	"the README's query: alice (no hard limit) and the session without byte_limit, not bob"
);
$su->query_safe('BEGIN');
$su->query_safe("SET LOCAL ssl_renegotiate.interval = '10min'");
is( $su->query_safe($own),
	'NULL NULL 00:10:00 warn',
	'SET LOCAL interval in its own row');
$su->query_safe('COMMIT');
is($su->query_safe($own), 'NULL NULL NULL warn', '... and gone after COMMIT');
$su->query_safe('RESET ssl_renegotiate.byte_limit');
is( $su->query_safe($own),
	(1 * MB) . ' NULL NULL warn',
	'RESET: the file\'s again');

# 4. visibility: bob may not see alice's row, and sees his own
is( $bob->query_safe(
		"SELECT num_nulls(byte_limit, hard_limit, rekey_interval, tls12) FROM ssl_renegotiate_activity WHERE pid = $a_pid"
	),
	4,
	"bob reads NULL for alice's limits");
is( $bob->query_safe($own),
	(1 * MB) . ' ' . (3 * GB) . ' 00:30:00 renegotiate',
	'bob reads his own');

# 3. ALTER SYSTEM and a reload: at each session's next I/O
$node->safe_psql(
	'postgres', q{
ALTER SYSTEM SET ssl_renegotiate.hard_limit = '4GB';
ALTER SYSTEM SET ssl_renegotiate.byte_limit = '4MB';
SELECT pg_reload_conf();
});
is( limits_of($a_pid),
	(2 * MB) . ' NULL 01:00:00 warn',
	'an idle session keeps its values until its next I/O');

# each session applies the reload before its next command
sub wait_for_setting
{
	my ($session, $name, $value) = @_;
	for (1 .. 100)
	{
		return 1 if $session->query_safe("SHOW $name") eq $value;
		select(undef, undef, undef, 0.05);
	}
	return 0;
}
ok(wait_for_setting($alice, 'ssl_renegotiate.hard_limit', '4GB'),
	'alice got the reload');
is( limits_of($a_pid),
	(2 * MB) . ' ' . (4 * GB) . ' 01:00:00 warn',
	"alice's row: ALTER SYSTEM's hard_limit; her role's byte_limit still wins"
);
ok(wait_for_setting($bob, 'ssl_renegotiate.byte_limit', '4MB'),
	'bob got the reload');
is( limits_of($b_pid),
	(4 * MB) . ' ' . (3 * GB) . ' 00:30:00 renegotiate',
	"bob's row: ALTER SYSTEM's byte_limit; the database's hard_limit still wins"
);

$node->safe_psql(
	'postgres', q{
ALTER SYSTEM RESET ALL;
SELECT pg_reload_conf();
});
$_->quit for ($alice, $bob, $su);
done_testing();
