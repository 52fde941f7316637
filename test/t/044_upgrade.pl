# ALTER EXTENSION ssl_renegotiate UPDATE on every path to 1.3, with a DBA's
# grants and a user's view on ours, and a TLS session open throughout.
#
# What this proves, for 1.0 -> 1.3 by a plain UPDATE (the direct script to
# 1.2, then 1.2 -> 1.3), 1.0 -> 1.1 -> 1.2 -> 1.3 and 1.1 -> 1.3:
#
#  1. A DBA's REVOKE of SELECT on both views and of EXECUTE on their
#     functions from PUBLIC, their GRANT to a monitoring role, a grant
#     option and a grant made with it, and a column privilege, survive the
#     update: relacl, attacl and proacl (of the function the view calls)
#     are the same before and after; the monitoring role reads, the plain role is still refused
#     (on the view, and through a user's view, which needs EXECUTE on our
#     function).
#  2. A user's view on ssl_renegotiate_activity, and one on the totals, keep
#     working.
#  3. The extension's initial privileges (pg_init_privs) are those of a
#     fresh installation, so pg_dump writes the DBA's REVOKE and GRANTs.
#  4. 1.0 -> 1.1, frozen as released, is what the README says: it fails on
#     the user's view, and without it resets the activity view's and
#     function's privileges to the defaults.
#  5. The TLS session open across all of it keeps counting, and reads its
#     row with 1.2's columns after each update.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP ();
use SslrTest;

my $node =
  new_tls_node('upgrade', conf => "ssl_renegotiate.byte_limit = 0\n");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE ROLE regress_monitor LOGIN;
CREATE ROLE regress_delegate LOGIN;
CREATE ROLE regress_reporter LOGIN;
CREATE ROLE regress_plain LOGIN;
CREATE DATABASE fresh;
});
$node->safe_psql('fresh', 'CREATE EXTENSION ssl_renegotiate');

# The extension's initial privileges, as pg_dump reads them.
my $init_privs_sql = q{
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
  SELECT pg_describe_object(i.classoid, i.objoid, i.objsubid)
         || ' ' || i.privtype::text || ' ' || i.initprivs::text AS line
  FROM pg_depend d JOIN pg_init_privs i
    ON i.classoid = d.classid AND i.objoid = d.objid AND i.objsubid = d.objsubid
  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ssl_renegotiate')) x};
my $fresh_init_privs = $node->safe_psql('fresh', $init_privs_sql);
like(
	$fresh_init_privs,
	qr/view ssl_renegotiate_activity e \{[^}]*,=r\//,
	'fresh: the initial privileges say PUBLIC may read the activity view');

# The privileges a DBA cares about: both views, the function behind the
# activity view (the zero-argument one before 1.2, 1.2's after), the
# totals' and the reset function.
my $acl_sql = q{
SELECT json_build_object(
  'activity', (SELECT relacl FROM pg_class WHERE relname = 'ssl_renegotiate_activity'),
  'totals', (SELECT relacl FROM pg_class WHERE relname = 'ssl_renegotiate_totals'),
  'activity_columns', (SELECT json_object_agg(attname, attacl) FROM pg_attribute
                       WHERE attrelid = 'ssl_renegotiate_activity'::regclass AND attacl IS NOT NULL),
  'activity_function', (SELECT proacl FROM pg_proc p JOIN pg_rewrite r ON true
                          JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass
                           AND d.objid = r.oid AND d.refobjid = p.oid
                        WHERE r.ev_class = 'ssl_renegotiate_activity'::regclass
                          AND d.refclassid = 'pg_proc'::regclass
                          AND p.proname = 'ssl_renegotiate_activity'),
  'totals_function', (SELECT proacl FROM pg_proc WHERE oid = 'ssl_renegotiate_totals()'::regprocedure),
  'reset_function', (SELECT proacl FROM pg_proc WHERE oid = 'ssl_renegotiate_reset()'::regprocedure))};

# What a DBA did: nobody reads but the monitoring role (and the reporter,
# granted by the delegate with the grant option it holds); and a user's
# view, readable by the plain role and the monitoring role.
sub dba_changes
{
	$node->safe_psql(
		'postgres', q{
REVOKE SELECT ON ssl_renegotiate_activity, ssl_renegotiate_totals FROM PUBLIC;
GRANT SELECT ON ssl_renegotiate_activity, ssl_renegotiate_totals TO regress_monitor, regress_reporter;
REVOKE EXECUTE ON FUNCTION ssl_renegotiate_activity(), ssl_renegotiate_totals() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_activity(), ssl_renegotiate_totals() TO regress_monitor;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_activity() TO regress_delegate WITH GRANT OPTION;
SET ROLE regress_delegate;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_activity() TO regress_reporter;
RESET ROLE;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_reset() TO regress_monitor;
GRANT SELECT (pid, bytes_sent) ON ssl_renegotiate_activity TO regress_delegate;
});
	user_view();
}

sub user_view
{
	$node->safe_psql(
		'postgres', q{
CREATE VIEW public.myview AS SELECT pid, bytes_sent FROM ssl_renegotiate_activity;
GRANT SELECT ON public.myview TO regress_plain, regress_monitor, regress_reporter;
CREATE VIEW public.mytotals AS SELECT connections, bytes_sent FROM ssl_renegotiate_totals;
GRANT SELECT ON public.mytotals TO regress_monitor;
});
}

sub acls { return $node->safe_psql('postgres', $acl_sql); }

sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SET ROLE $role; $sql", on_error_stop => 1);
	return ($ret, $out, $err);
}

# The TLS session open throughout, as the bootstrap superuser.
my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $pid = $s->query_safe('SELECT pg_backend_pid()');
my $last_sent = 0;

# After an update (to 1.3, the default, unless $version says): everything
# the DBA did is there.
sub check_kept
{
	my ($path, $before, $version) = @_;
	$version //= '1.3';

	is( $node->safe_psql(
			'postgres',
			"SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate'"
		),
		$version,
		"$path: at $version");
	is(acls(), $before, "$path: relacl and proacl as before the update");
	is($node->safe_psql('postgres', $init_privs_sql),
		$fresh_init_privs,
		"$path: initial privileges as a fresh installation's");

	my ($ret, $out, $err) = as_role('regress_monitor',
		"SELECT count(*) FROM public.myview WHERE pid = $pid");
	is("$ret $out", '0 1',
		"$path: the user's view works, for the monitoring role");
	($ret, $out, $err) =
	  as_role('regress_monitor', 'SELECT count(*) FROM public.mytotals');
	is("$ret $out", '0 1', "$path: ... and the one on the totals");
	($ret, $out, $err) = as_role('regress_reporter',
		"SELECT byte_limit IS NULL FROM ssl_renegotiate_activity WHERE pid = $pid"
	);
	is("$ret $out", '0 t',
		"$path: the role granted by the delegate reads 1.2's columns");
	($ret, $out, $err) =
	  as_role('regress_plain',
		'SELECT count(*) FROM ssl_renegotiate_activity');
	like(
		$err,
		qr/permission denied for view ssl_renegotiate_activity/,
		"$path: the plain role is still refused the view");
	($ret, $out, $err) =
	  as_role('regress_plain', 'SELECT count(*) FROM public.myview');
	like(
		$err,
		qr/permission denied for function ssl_renegotiate_activity/,
		"$path: ... and our function, through the user's view");
	($ret, $out, $err) =
	  as_role('regress_plain', 'SELECT count(*) FROM ssl_renegotiate_totals');
	like(
		$err,
		qr/permission denied for view ssl_renegotiate_totals/,
		"$path: ... and the totals");

	# pg_dump writes what the DBA changed, as against the initial privileges
	my ($dump, $dump_err);
	IPC::Run::run(
		[ 'pg_dump', '--schema-only', '-d', $node->connstr('postgres') ],
		'>', \$dump, '2>', \$dump_err)
	  or die "pg_dump failed: $dump_err";
	like(
		$dump,
		qr/REVOKE ALL ON FUNCTION public\.ssl_renegotiate_activity\(pid integer, OUT [^)]*\) FROM PUBLIC;/,
		"$path: pg_dump revokes EXECUTE on 1.2's function from PUBLIC");
	like(
		$dump,
		qr/GRANT ALL ON FUNCTION public\.ssl_renegotiate_activity\(pid integer, OUT [^)]*\) TO regress_monitor;/,
		"$path: ... and grants it to the monitoring role");
	like(
		$dump,
		qr/REVOKE SELECT ON TABLE public\.ssl_renegotiate_activity FROM PUBLIC;/,
		"$path: ... and revokes SELECT on the view");

	# the open session reads its row with the version's columns (1.2's
	# 30, 1.3's 31), still counting
	my $row = JSON::PP::decode_json(
		$s->query_safe(
			"SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = $pid"
		));
	my $ncols = $version eq '1.2' ? 30 : 31;
	is(scalar(keys %$row),
		$ncols, "$path: the open session reads $ncols columns");
	ok( exists $row->{byte_limit} && !defined $row->{byte_limit},
		"$path: its byte_limit is off (NULL), as configured");
	is($row->{tls12}, 'warn', "$path: its tls12 policy");
	cmp_ok($row->{bytes_sent}, '>', $last_sent, "$path: counting went on");
	$last_sent = $row->{bytes_sent};
}

sub fresh_start
{
	my ($version) = @_;
	$node->safe_psql(
		'postgres',
		"DROP EXTENSION IF EXISTS ssl_renegotiate CASCADE;
		 CREATE EXTENSION ssl_renegotiate VERSION '$version'");
}

# ---- 1.0 -> 1.2, by a plain UPDATE: the direct script
fresh_start('1.0');
my $row = JSON::PP::decode_json(
	$s->query_safe(
		"SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = $pid"
	));
is(scalar(keys %$row), 23,
	'1.0: the session reads its own row of 23 columns');
$last_sent = $row->{bytes_sent};
dba_changes();
my $before = acls();
like(
	$before,
	qr/regress_reporter=X\/regress_delegate/,
	'1.0: the delegate granted EXECUTE with its grant option');
$node->safe_psql('postgres', 'ALTER EXTENSION ssl_renegotiate UPDATE');
check_kept('1.0 -> 1.3', $before);

# ---- 1.0 -> 1.1 -> 1.2: 1.0 -> 1.1 as released
fresh_start('1.0');
dba_changes();
my ($ret, $out, $err) =
  $node->psql('postgres', "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.1'");
like(
	$err,
	qr/cannot drop view ssl_renegotiate_activity because other objects depend on it/,
	'1.0 -> 1.1: fails on the user\'s view, as the README says');
$node->safe_psql('postgres', 'DROP VIEW public.myview, public.mytotals');
$node->safe_psql('postgres',
	"ALTER EXTENSION ssl_renegotiate UPDATE TO '1.1'");
my $reset = JSON::PP::decode_json(acls());
ok( (grep { /^=r\// } @{ $reset->{activity} }),
	'1.0 -> 1.1: resets the activity view to PUBLIC SELECT, as the README says'
);
ok(!defined $reset->{activity_function},
	'1.0 -> 1.1: ... and its function to the default privileges');
is( (   as_role(
			'regress_plain', 'SELECT 1 FROM ssl_renegotiate_activity LIMIT 1')
	)[0],
	0,
	'1.0 -> 1.1: the plain role reads the activity view again');
like(JSON::PP::encode_json($reset->{totals}),
	qr/regress_monitor=r/,
	'1.0 -> 1.1: the totals view keeps its privileges');
# the DBA does it again at 1.1, then updates
$node->safe_psql(
	'postgres', q{
REVOKE SELECT ON ssl_renegotiate_activity FROM PUBLIC;
GRANT SELECT ON ssl_renegotiate_activity TO regress_monitor, regress_reporter;
REVOKE EXECUTE ON FUNCTION ssl_renegotiate_activity() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_activity() TO regress_monitor;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_activity() TO regress_delegate WITH GRANT OPTION;
SET ROLE regress_delegate;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_activity() TO regress_reporter;
RESET ROLE;
});
user_view();
$before = acls();
$node->safe_psql('postgres',
	"ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2'");
check_kept('1.0 -> 1.1 -> 1.2', $before, '1.2');
$node->safe_psql('postgres', 'ALTER EXTENSION ssl_renegotiate UPDATE');
check_kept('1.0 -> 1.1 -> 1.2 -> 1.3', $before);

# ---- 1.1 -> 1.2
fresh_start('1.1');
$row = JSON::PP::decode_json(
	$s->query_safe(
		"SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = $pid"
	));
is(scalar(keys %$row), 26,
	'1.1: the session reads its own row of 26 columns');
dba_changes();
$before = acls();
$node->safe_psql('postgres', 'ALTER EXTENSION ssl_renegotiate UPDATE');
check_kept('1.1 -> 1.3', $before);

# ssl_renegotiate_rekey still rotates the open session's keys
is($s->query_safe("SELECT ssl_renegotiate_rekey($pid)"),
	't', '1.2: ssl_renegotiate_rekey on the open session');
$s->query_safe('SELECT 1');
my $after = activity_row($node, $pid);
cmp_ok($after->{rekeys_sent}, '>=', 1, '1.2: its keys rotated');
$s->quit;

# The new function's grants left no dependency on a role behind (the initial
# privileges' own, which PostgreSQL 17 and later record): once its
# privileges are revoked, the role can go.
$node->safe_psql(
	'postgres', q{
REVOKE ALL ON FUNCTION ssl_renegotiate_activity(integer) FROM regress_delegate CASCADE;
REVOKE ALL ON ssl_renegotiate_activity, ssl_renegotiate_totals, public.myview FROM regress_reporter;
});
($ret, $out, $err) = $node->psql('postgres', 'DROP ROLE regress_reporter');
is("$ret $err", '0 ',
	'a role granted EXECUTE on the new function can be dropped');

done_testing();
