# pg_upgrade from another major, with the extension at 1.3.
#
# Run with the NEW major's harness and extension, the old installation
# (its prefix, with the extension installed there too) in the environment
# variable oldinstall, as PostgreSQL's own pg_upgrade test takes it;
# skipped without it (every cell), a failure if it names no installation
# with the extension.  scripts/test.sh runs it once, 17 -> 19, after the
# cells of both:
#
#   oldinstall=/path/to/pg17 make check-tap PROVE_TESTS=test/t/049_pg_upgrade.pl
#
# What this proves, on a cluster of the old major with two databases, a
# DBA's revokes and grants, settings of ssl_renegotiate.* per role, per
# database and per role in database, and TLS traffic of two roles in both
# databases:
#
#  1. pg_upgrade (--copy) exits 0.
#  2. The extension is at 1.3 in both databases, relacl, attacl and proacl
#     of its objects are the old cluster's, and so is pg_db_role_setting.
#  3. pg_upgrade leaves pg_stat/ out, and so the totals.  The old server,
#     stopped cleanly by pg_upgrade, wrote them to
#     pg_stat/ssl_renegotiate.stat; docs/upgrading.md's one command copies
#     that file to the new data directory before its first start.  The
#     file's format has nothing of the major in it (int64 counters, OIDs,
#     timestamps, a CRC), and the new major reads it: the cluster totals
#     (every counter, stats_reset too) are those the old cluster had at
#     shutdown, as pg_read_all_stats reads them, and so is each row per
#     database and role (pg_upgrade keeps the OIDs of databases and roles,
#     by which the rows are kept).  pg_upgrade's own connections, over the
#     Unix socket, are not TLS and count nothing.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use Cwd        ();
use File::Copy ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $oldinstall = $ENV{oldinstall};
plan skip_all =>
  'pg_upgrade from another major: set oldinstall to that installation (scripts/test.sh does, 17 -> 19)'
  unless defined $oldinstall && $oldinstall ne '';
# given, it must be usable: a run that meant to upgrade fails
die "oldinstall=$oldinstall has no bin/pg_ctl\n"
  unless -x "$oldinstall/bin/pg_ctl";
my $old_sharedir = `"$oldinstall/bin/pg_config" --sharedir`;
chomp $old_sharedir;
die "the extension is not installed in oldinstall=$oldinstall\n"
  unless -f "$old_sharedir/extension/ssl_renegotiate--1.2--1.3.sql";

# Both with data checksums (the default of initdb from 18 on, not before):
# pg_upgrade wants the same on both sides.
my $old = new_tls_node(
	'old',
	install_path => $oldinstall,
	extra => ['--data-checksums']);
my $new = new_tls_node('new', extra => ['--data-checksums']);
my ($old_major) = $old->pg_version =~ /^(\d+)/;
my ($new_major) = $new->pg_version =~ /^(\d+)/;
note "pg_upgrade from $old_major (" . $old->pg_version . ") to $new_major";

$old->start;
$old->safe_psql(
	'postgres', q{
CREATE ROLE regress_monitor LOGIN;
CREATE ROLE regress_app LOGIN;
CREATE DATABASE app OWNER regress_app;
ALTER ROLE regress_app SET ssl_renegotiate.byte_limit = '64MB';
ALTER DATABASE app SET ssl_renegotiate.interval = '1h';
ALTER ROLE regress_app IN DATABASE app SET ssl_renegotiate.tls12 = 'terminate';
ALTER ROLE regress_monitor SET ssl_renegotiate.hard_limit = '2GB';
});
for my $db ('postgres', 'app')
{
	$old->safe_psql(
		$db, q{
CREATE EXTENSION ssl_renegotiate;
REVOKE SELECT ON ssl_renegotiate_activity, ssl_renegotiate_totals,
    ssl_renegotiate_database_role_totals FROM PUBLIC;
GRANT SELECT ON ssl_renegotiate_activity, ssl_renegotiate_totals,
    ssl_renegotiate_database_role_totals TO regress_monitor;
REVOKE EXECUTE ON FUNCTION ssl_renegotiate_activity(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_activity(integer) TO regress_monitor WITH GRANT OPTION;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_reset() TO regress_monitor;
GRANT SELECT (pid, bytes_sent) ON ssl_renegotiate_activity TO regress_app;
CREATE VIEW public.u_totals AS SELECT connections, bytes_sent FROM ssl_renegotiate_totals;
GRANT SELECT ON public.u_totals TO regress_monitor;
});
}

# Traffic: the superuser, the application role in its database, the
# monitoring role in both, over TLS 1.2 and 1.3.
my $i = 0;
for my $who (
	[ 'postgres', undef ],
	[ 'app', 'regress_app' ],
	[ 'app', 'regress_monitor' ],
	[ 'postgres', 'regress_monitor' ])
{
	my ($db, $user) = @$who;
	$old->safe_psql(
		$db,
		'SELECT repeat(\'x\', ' . (20000 * ++$i) . ')',
		connstr => tls_connstr(
			$old,
			dbname => $db,
			tls => ($i % 2 ? '1.2' : '1.3'),
			(defined $user ? (user => $user) : ())));
}
# each backend gone, its last record folded (test/t/043_restart.pl)
$old->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM ssl_renegotiate_activity')
  or die 'the TLS sessions did not end';

# What must come through, read on the old cluster as the bootstrap
# superuser (a member of pg_read_all_stats) over the Unix socket, which
# counts nothing.
my $totals_sql = q{
SELECT connections, bytes_sent, bytes_received, records_sent, records_received,
       rekeys_sent, rekeys_received, terminations,
       extract(epoch FROM stats_reset)
FROM ssl_renegotiate_totals};
my $role_totals_sql = q{
SELECT string_agg(concat_ws(' ', dbid, datname, userid, usename, connections,
                            bytes_sent, bytes_received, records_sent, records_received,
                            extract(epoch FROM stats_reset)),
                  E'\n' ORDER BY datname COLLATE "C", usename COLLATE "C")
FROM ssl_renegotiate_database_role_totals};
my $settings_sql = q{
SELECT string_agg(line, E'\n' ORDER BY line COLLATE "C") FROM (
  SELECT concat_ws(' ', coalesce(d.datname, '*'), coalesce(r.rolname, '*'),
                   s.setconfig::text) AS line
  FROM pg_db_role_setting s
       LEFT JOIN pg_database d ON d.oid = s.setdatabase
       LEFT JOIN pg_roles r ON r.oid = s.setrole) x};
my $acl_sql =
  q{SELECT (SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate') || E'\n' || (}
  . acl_lines_sql() . ')';

my $totals = $old->safe_psql('postgres', $totals_sql);
my $role_totals = $old->safe_psql('postgres', $role_totals_sql);
my $settings = $old->safe_psql('postgres', $settings_sql);
my %acls = map { $_ => $old->safe_psql($_, $acl_sql) } ('postgres', 'app');
like($totals, qr/^4\|/, "old ($old_major): 4 TLS connections in the totals");
is(scalar(() = $role_totals =~ /\n/g) + 1,
	4, "old ($old_major): 4 rows per database and role");
like($acls{app}, qr/^1\.3\n/, "old ($old_major): the extension at 1.3");
$old->stop;

# 1. pg_upgrade, from a directory of its own (it writes there before 15)
my $cwd = Cwd::getcwd();
my $work = PostgreSQL::Test::Utils::tempdir;
chdir $work or die "chdir $work: $!";
my ($ret, $stdout, $stderr) = (0, '', '');
IPC::Run::run(
	[
		'pg_upgrade', '--no-sync',
		'--copy', '-d',
		$old->data_dir, '-D',
		$new->data_dir, '-b',
		"$oldinstall/bin", '-B',
		$new->config_data('--bindir'), '-s',
		$new->host, '-p',
		$old->port, '-P',
		$new->port
	],
	'>',
	\$stdout,
	'2>',
	\$stderr);
$ret = $? >> 8;
chdir $cwd or die "chdir $cwd: $!";
is($ret, 0, "pg_upgrade $old_major -> $new_major exits 0")
  or diag "$stdout\n$stderr";

# 3. the totals: pg_upgrade left them behind, in the old data directory,
# written when it stopped the old server
my $old_file = $old->data_dir . '/pg_stat/ssl_renegotiate.stat';
my $new_file = $new->data_dir . '/pg_stat/ssl_renegotiate.stat';
ok(-s $old_file,
	'the old server wrote its totals when pg_upgrade stopped it');
# docs/upgrading.md's step, after pg_upgrade and before the first start:
#   cp OLD_PGDATA/pg_stat/ssl_renegotiate.stat NEW_PGDATA/pg_stat/
File::Copy::copy($old_file, $new_file)
  or die "cp $old_file $new_file: $!";

$new->start;

# 3. the totals, read first, over the Unix socket: the file read and
# removed, the totals and each row per database and role the old
# cluster's at shutdown
my $log = slurp_file($new->logfile);
unlike(
	$log,
	qr/ignoring the totals saved/,
	"$new_major reads the file $old_major wrote, without complaint");
ok(!-e $new_file, '... and removes it once read');
is( $new->safe_psql('postgres', $totals_sql),
	$totals,
	"the totals (connections, bytes, records, rekeys, terminations, stats_reset) as $old_major had them at shutdown"
);
is($new->safe_psql('postgres', $role_totals_sql),
	$role_totals, 'each row per database and role as the old cluster had it');

# 2. the extension, its grants, the settings
for my $db ('postgres', 'app')
{
	is( $new->safe_psql($db, $acl_sql),
		$acls{$db},
		"$db: the extension at 1.3, relacl, attacl and proacl as on $old_major"
	);
}
is($new->safe_psql('postgres', $settings_sql),
	$settings, 'pg_db_role_setting as on the old cluster');
like(
	$settings,
	qr/app regress_app \{ssl_renegotiate\.tls12=terminate\}/,
	'... the role in database setting among them');
is( $new->safe_psql(
		'app',
		'SELECT current_setting(\'ssl_renegotiate.interval\') || \' \' || '
		  . 'current_setting(\'ssl_renegotiate.byte_limit\') || \' \' || '
		  . 'current_setting(\'ssl_renegotiate.tls12\')',
		connstr => tls_connstr($new, dbname => 'app', user => 'regress_app')),
	'1h 64MB terminate',
	'a TLS session of the role in its database has the three settings');
$new->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM ssl_renegotiate_activity')
  or die 'the TLS session did not end';
my @before = split /\|/, $totals;
my @after = split /\|/, $new->safe_psql('postgres', $totals_sql);
is($after[0], $before[0] + 1, 'the new cluster counts on from there');

done_testing();
