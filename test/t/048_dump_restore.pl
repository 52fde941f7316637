# pg_dump -Fc and pg_restore of a database with the extension, on every
# update path to 1.3.
#
# What this proves, for a fresh 1.3, 1.0 -> 1.3 (a plain UPDATE: the direct
# script to 1.2, then 1.2 -> 1.3), 1.1 -> 1.3, 1.2 -> 1.3, 1.0 -> 1.2 ->
# 1.3 and 1.0 -> 1.1 -> 1.2 -> 1.3, each in a database of its own, with a
# DBA's REVOKEs of the default grants (SELECT on the views, EXECUTE on their
# functions, from PUBLIC), GRANTs to a monitoring role (one with a grant
# option, a column privilege, EXECUTE on the reset function), a user's views
# on each of our views, and, where the path starts before 1.2, a user's view
# on the old function ssl_renegotiate_activity() (no argument), which the
# update to 1.2 keeps (with a WARNING) and the one to 1.3 hands to the user
# (with a WARNING):
#
#  1. pg_restore into a fresh database exits 0 and writes nothing on stderr.
#  2. The extension there is at 1.3, and every user's view exists and
#     returns rows (a TLS session is open throughout, so the activity has
#     one).
#  3. relacl, attacl and proacl of the extension's objects, of the user's
#     views and of the kept function are those of the source database.
#  4. The kept function is there, outside the extension (the user's own),
#     with the view that calls it.
#
# Before 1.3 a kept function stayed a member of the extension: pg_dump
# leaves members out (it writes CREATE EXTENSION), and pg_restore made a
# fresh installation without it, so the user's view failed with "function
# public.ssl_renegotiate_activity() does not exist" and was lost.  The
# last part stops a database on the path 1.0 -> 1.2 and shows that failure
# (it is PostgreSQL's way with extension members; the update to 1.3 is what
# avoids it).  With ssl_renegotiate--1.2--1.3.sql's DO block taken out,
# checks 1, 2 and 4 fail on the paths from 1.0 and 1.1 the same way.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run ();
use SslrTest;

my $node = new_tls_node('dump', conf => "ssl_renegotiate.byte_limit = 0\n");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE ROLE regress_monitor LOGIN;
CREATE ROLE regress_delegate LOGIN;
CREATE ROLE regress_reporter LOGIN;
CREATE ROLE regress_plain LOGIN;
});

# A TLS session open throughout: the activity view has a row.
my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
$s->query_safe('SELECT 1');

# psql in a database; returns (exit status, stdout, stderr)
sub run_sql
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql, on_error_stop => 1);
	return ($ret, $out, $err);
}

sub sql_ok
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = run_sql($db, $sql);
	die "in $db: $sql\n$err" if $ret != 0;
	return $err;
}

# What a DBA did at $version: nobody reads our views and functions but the
# monitoring role (and the reporter, granted by the delegate with its grant
# option), the monitoring role may reset, the delegate reads two columns.
sub dba_grants
{
	my ($db, $version) = @_;
	my $fn =
	  $version lt '1.2'
	  ? 'ssl_renegotiate_activity()'
	  : 'ssl_renegotiate_activity(integer)';
	sql_ok(
		$db, qq{
REVOKE SELECT ON ssl_renegotiate_activity, ssl_renegotiate_totals FROM PUBLIC;
GRANT SELECT ON ssl_renegotiate_activity, ssl_renegotiate_totals TO regress_monitor;
REVOKE EXECUTE ON FUNCTION $fn, ssl_renegotiate_totals() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION $fn, ssl_renegotiate_totals() TO regress_monitor;
GRANT EXECUTE ON FUNCTION $fn TO regress_delegate WITH GRANT OPTION;
SET ROLE regress_delegate;
GRANT EXECUTE ON FUNCTION $fn TO regress_reporter;
RESET ROLE;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_reset() TO regress_monitor;
GRANT SELECT (pid, bytes_sent) ON ssl_renegotiate_activity TO regress_delegate;
});
	return;
}

# The user's view on the old function, before 1.2.
sub user_view_on_old_function
{
	my ($db) = @_;
	sql_ok(
		$db, q{
CREATE VIEW public.u_old AS SELECT pid, bytes_sent FROM ssl_renegotiate_activity();
GRANT SELECT ON public.u_old TO regress_monitor;
});
	return;
}

# The user's views on the activity and totals views.
sub user_views
{
	my ($db) = @_;
	sql_ok(
		$db, q{
CREATE VIEW public.u_activity AS SELECT pid, bytes_sent FROM ssl_renegotiate_activity;
GRANT SELECT ON public.u_activity TO regress_monitor, regress_plain;
CREATE VIEW public.u_totals AS SELECT connections, bytes_sent FROM ssl_renegotiate_totals;
GRANT SELECT ON public.u_totals TO regress_monitor;
});
	return;
}

# ... and on the one per database and role (from 1.2).
sub user_view_on_role_totals
{
	my ($db) = @_;
	sql_ok(
		$db, q{
REVOKE SELECT ON ssl_renegotiate_database_role_totals FROM PUBLIC;
GRANT SELECT ON ssl_renegotiate_database_role_totals TO regress_monitor;
CREATE VIEW public.u_role_totals AS
    SELECT dbid, userid, connections FROM ssl_renegotiate_database_role_totals;
GRANT SELECT ON public.u_role_totals TO regress_monitor;
});
	return;
}

# Every privilege of the extension's objects, the user's views and the kept
# function, one line each, by name.
my $acl_sql = acl_lines_sql();

# The extension's version, and whether the old function exists and is a
# member of the extension.
my $state_sql = q{
SELECT (SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate')
  || ' ' || CASE
    WHEN to_regprocedure('ssl_renegotiate_activity()') IS NULL THEN 'none'
    WHEN EXISTS (SELECT FROM pg_depend
                 WHERE classid = 'pg_proc'::regclass
                   AND objid = to_regprocedure('ssl_renegotiate_activity()')
                   AND refclassid = 'pg_extension'::regclass AND deptype = 'e')
      THEN 'member' ELSE 'user' END};

my $dump_dir = PostgreSQL::Test::Utils::tempdir;

sub dump_restore
{
	my ($src, $dst) = @_;
	my $file = "$dump_dir/$src.dump";
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'pg_dump', '-Fc', '-f', $file, '-d', $node->connstr($src) ],
		'>', \$out, '2>', \$err);
	die "pg_dump of $src failed: $err" if $? != 0;
	$node->safe_psql('postgres', "CREATE DATABASE $dst");
	($out, $err) = ('', '');
	IPC::Run::run([ 'pg_restore', '-d', $node->connstr($dst), $file ],
		'>', \$out, '2>', \$err);
	return ($? >> 8, $err);
}

# One path: CREATE EXTENSION VERSION $start in a database of its own, the
# DBA's grants and the user's views, then each update of @steps (undef: a
# plain UPDATE); dump, restore, compare.
my $n = 0;

sub check_path
{
	my ($path, $start, @steps) = @_;
	my $src = 'src' . ++$n;
	my $dst = 'dst' . $n;
	my $kept = $start lt '1.2';
	$node->safe_psql('postgres', "CREATE DATABASE $src");
	sql_ok($src, "CREATE EXTENSION ssl_renegotiate VERSION '$start'");
	dba_grants($src, $start);

	my $version = $start;
	if ($start eq '1.0' && defined $steps[0] && $steps[0] eq '1.1')
	{
		# 1.0 -> 1.1 as released: it fails on a user's view on ours and
		# resets the activity view's and function's privileges
		# (test/t/044_upgrade.pl); the DBA does it again at 1.1.
		shift @steps;
		sql_ok($src, "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.1'");
		$version = '1.1';
		dba_grants($src, $version);
	}
	user_view_on_old_function($src) if $kept;
	user_views($src);
	user_view_on_role_totals($src) unless $kept;

	my $notices = '';
	for my $to (@steps)
	{
		$notices .= sql_ok($src,
			'ALTER EXTENSION ssl_renegotiate UPDATE'
			  . (defined $to ? " TO '$to'" : ''));
	}
	# what 1.2 brought, once there
	user_view_on_role_totals($src) if $kept;
	if ($kept)
	{
		like(
			$notices,
			qr/WARNING:  function ssl_renegotiate_activity\(\) is kept because other objects depend on it/,
			"$path: the update to 1.2 keeps the old function, with a WARNING"
		);
		like(
			$notices,
			qr/WARNING:  function ssl_renegotiate_activity\(\) is no longer part of the extension/,
			"$path: the update to 1.3 hands it to the user, with a WARNING");
	}
	my $state = $node->safe_psql($src, $state_sql);
	is($state, $kept ? '1.3 user' : '1.3 none', "$path: the source at 1.3");
	my $acls = $node->safe_psql($src, $acl_sql);
	like(
		$acls,
		qr/regress_reporter=X\/regress_delegate/,
		"$path: the source has the delegate's grant");

	my ($rc, $err) = dump_restore($src, $dst);
	is($rc, 0, "$path: pg_restore exits 0");
	is($err, '', "$path: ... and writes nothing on stderr");

	is( $node->safe_psql($dst, $state_sql),
		$state,
		"$path: the restored extension at 1.3"
		  . ($kept ? ', the old function the user\'s' : ''));
	is($node->safe_psql($dst, $acl_sql),
		$acls, "$path: relacl, attacl and proacl as in the source");
	my @views = qw(u_activity u_totals u_role_totals);
	push @views, 'u_old' if $kept;
	for my $v (@views)
	{
		my ($ret, $out, $verr) =
		  run_sql($dst, "SELECT count(*) > 0 FROM public.$v");
		is("$ret $out", '0 t', "$path: the user's view $v returns rows");
	}
	# the privileges act: the monitoring role reads through the user's
	# views, the plain role is refused our function through its view
	my ($ret, $out, $verr) = run_sql($dst,
		'SET ROLE regress_monitor; SELECT count(*) > 0 FROM public.u_activity'
		  . ($kept ? ' UNION ALL SELECT count(*) > 0 FROM public.u_old' : '')
	);
	is( "$ret $out",
		$kept ? "0 t\nt" : '0 t',
		"$path: the monitoring role reads the restored views");
	($ret, $out, $verr) = run_sql($dst,
		'SET ROLE regress_plain; SELECT count(*) FROM public.u_activity');
	like(
		$verr,
		qr/permission denied for function ssl_renegotiate_activity/,
		"$path: the plain role is still refused our function");
	return;
}

check_path('fresh 1.3', '1.3');
check_path('1.0 -> 1.3', '1.0', undef);
check_path('1.1 -> 1.3', '1.1', undef);
check_path('1.2 -> 1.3', '1.2', undef);
check_path('1.0 -> 1.2 -> 1.3', '1.0', '1.2', '1.3');
check_path('1.0 -> 1.1 -> 1.2 -> 1.3', '1.0', '1.1', '1.2', '1.3');

# Before 1.3: a database stopped at 1.2 with the kept function, a member of
# the extension, is dumped without it, and its restore loses the view that
# calls it.  This is what the update to 1.3 prevents; here it shows that
# the checks above would see it.
$node->safe_psql('postgres', 'CREATE DATABASE at12');
sql_ok('at12', "CREATE EXTENSION ssl_renegotiate VERSION '1.0'");
user_view_on_old_function('at12');
sql_ok('at12', "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2'");
is($node->safe_psql('at12', $state_sql),
	'1.2 member',
	'1.0 -> 1.2: the kept function is a member of the extension');
my ($rc, $err) = dump_restore('at12', 'at12_restored');
isnt($rc, 0, '1.0 -> 1.2: pg_restore of that dump fails');
like(
	$err,
	qr/function public\.ssl_renegotiate_activity\(\) does not exist/,
	'1.0 -> 1.2: ... on the user\'s view of the old function');
is( $node->safe_psql(
		'at12_restored', q{SELECT to_regclass('public.u_old') IS NULL}),
	't',
	'1.0 -> 1.2: ... which the restored database lacks');

$s->quit;
done_testing();
