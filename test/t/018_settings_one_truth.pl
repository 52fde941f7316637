
# One truth per setting (issue 28): for every setting that has a limit in
# the activity view, SHOW, pg_settings (setting, unit, type, source, file
# and line) and the session's own row of ssl_renegotiate_activity agree,
# whatever the value came from:
#  1. a file included from postgresql.conf (conf.d/), with values typed as
#     1.0 to 1.2 took them ('1000.4ms' is rounded to 1s, as PostgreSQL
#     rounds its own integer settings);
#  2. SET, SET LOCAL in a transaction, a function's SET clauses, RESET:
#     no check refuses a pair of limits, and the row shows the safe rule
#     (hard_limit at least byte_limit + 64MB), with its LOG line;
#  3. ALTER SYSTEM + reload, also from a session whose database sets
#     byte_limit;
#  4. the 1.0 name ssl_renegotiate.limit in conf.d/: it sets byte_limit
#     itself (SHOW, pg_settings with its file and line, the row), at a
#     reload and at start-up, and the WARNING names that file and line;
#  5. a value refused at start-up keeps the default, and
#     ssl_renegotiate.refused_settings (pg_settings, for pg_monitor too)
#     counts the lines not in force until they are mended.
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

my $node = new_tls_node('one_truth', conf => "include_dir = 'conf.d'");
my $confd = $node->data_dir . '/conf.d';
mkdir $confd or die "cannot create $confd: $!";
my $dba = "$confd/dba.conf";

sub set_dba_conf
{
	my ($text) = @_;
	open(my $fh, '>', $dba) or die "cannot write $dba: $!";
	print $fh $text;
	close $fh;
	return;
}

set_dba_conf(<<'EOF');
ssl_renegotiate.byte_limit = '2MB'
ssl_renegotiate.hard_limit = '100MB'
ssl_renegotiate.interval = '1000.4ms'
ssl_renegotiate.tls12 = 'terminate'
EOF
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION ssl_renegotiate;
CREATE ROLE regress_monitor LOGIN IN ROLE pg_monitor;
CREATE DATABASE bigdb;
ALTER DATABASE bigdb SET ssl_renegotiate.byte_limit = '1GB';
});
$node->safe_psql('bigdb', 'CREATE EXTENSION ssl_renegotiate');

# What one session says of its limits: for each setting SHOW | setting |
# unit | vartype | source | the last two parts of sourcefile | sourceline,
# and its own row's byte_limit, hard_limit, rekey_interval and tls12.
my $settings_sql = q{
SELECT string_agg(concat_ws('|', substr(name, 17), current_setting(name),
         setting, unit, vartype, source,
         regexp_replace(sourcefile, '^.*/([^/]+/[^/]+)$', '\1'), sourceline),
       E'\n' ORDER BY name)
FROM pg_settings
WHERE name IN ('ssl_renegotiate.byte_limit', 'ssl_renegotiate.hard_limit',
               'ssl_renegotiate.interval', 'ssl_renegotiate.tls12')};
my $row_sql = q{
SELECT concat_ws(' ', 'row', coalesce(byte_limit::text, 'NULL'),
         coalesce(hard_limit::text, 'NULL'),
         coalesce(rekey_interval::text, 'NULL'), tls12)
FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid()};

sub state_of
{
	my ($s) = @_;
	return $s->query($settings_sql) . "\n" . $s->query($row_sql);
}

# A new TLS session; errors do not end it, so that a refused statement
# shows as a state that differs.
sub session
{
	my (%opts) = @_;
	return background_tls_psql(
		$node,
		tls_connstr($node, tls => '1.3', %opts),
		on_error_stop => 0);
}

sub reload_until
{
	my ($sql) = @_;
	$node->reload;
	$node->poll_query_until('postgres', $sql)
	  or die "reload not seen: $sql";
	return;
}

# psql's output, or '' after an error (which the comparison then shows)
sub sql
{
	my ($query, %opts) = @_;
	my (undef, $out) = $node->psql('postgres', $query, %opts);
	return $out;
}

my $file = 'configuration file|conf.d/dba.conf';
my $auto = 'configuration file|pgdata/postgresql.auto.conf';

# ---------------------------------------------------------------------
# 1. File values from conf.d/, as 1.0 to 1.2 took them
# ---------------------------------------------------------------------
my $s = session();
is( state_of($s),
	join("\n",
		"byte_limit|2MB|2048|kB|integer|$file|1",
		"hard_limit|100MB|102400|kB|integer|$file|2",
		"interval|1s|1|s|integer|$file|3",
		"tls12|terminate|terminate|enum|$file|4",
		'row ' . (2 * MB) . ' ' . (100 * MB) . ' 00:00:01 terminate'),
	'conf.d/dba.conf: SHOW in units, pg_settings and the row agree');

# ---------------------------------------------------------------------
# 2. A session's own values: no pair refused, the row shows the safe rule
# ---------------------------------------------------------------------
my $offset = -s $node->logfile;
$s->query(q{SET ssl_renegotiate.byte_limit = '3MB'});
$s->query(q{SET ssl_renegotiate.hard_limit = '64MB'});
$s->query(q{SET ssl_renegotiate.interval = '90s'});
is( state_of($s),
	join("\n",
		'byte_limit|3MB|3072|kB|integer|session',
		'hard_limit|64MB|65536|kB|integer|session',
		'interval|90s|90|s|integer|session',
		"tls12|terminate|terminate|enum|$file|4",
		'row ' . (3 * MB) . ' ' . (67 * MB) . ' 00:01:30 terminate'),
	'SET hard_limit below byte_limit + 64MB: taken, the row enforces 67MB');
ok( eval {
		$node->wait_for_log(
			qr/LOG:  ssl_renegotiate: pid \d+ enforces ssl_renegotiate\.hard_limit as 67MB, not 64MB\n.*DETAIL:  ssl_renegotiate\.hard_limit is 64MB \(from SET\), ssl_renegotiate\.byte_limit is 3MB \(from SET\)/,
			$offset);
	},
	'... and the safe rule is logged, with both values and their levels');

$s->query('BEGIN');
$s->query(q{SET LOCAL ssl_renegotiate.byte_limit = '1GB'});
$s->query(q{SET LOCAL ssl_renegotiate.hard_limit = '100MB'});
is( $s->query(
			q{SELECT current_setting('ssl_renegotiate.hard_limit')}
		  . ", ($row_sql)"),
	'100MB|row ' . GB . ' ' . (1024 + 64) * MB . ' 00:01:30 terminate',
	'SET LOCAL byte_limit 1GB, then hard_limit 100MB: taken, the row enforces 1088MB'
);
$s->query('COMMIT');
is( $s->query(
			q{SELECT current_setting('ssl_renegotiate.byte_limit')}
		  . ", ($row_sql)"),
	'3MB|row ' . (3 * MB) . ' ' . (67 * MB) . ' 00:01:30 terminate',
	'... and after COMMIT, the session\'s values again');

# (the row publishes the limits at the session's next I/O, after the call)
sql(q{
CREATE FUNCTION limits_in_function() RETURNS text LANGUAGE sql
    SET ssl_renegotiate.hard_limit = '100MB'
    SET ssl_renegotiate.byte_limit = '1GB'
    AS $$SELECT concat_ws(' ', current_setting('ssl_renegotiate.byte_limit'),
                             current_setting('ssl_renegotiate.hard_limit'))$$;
});
is($s->query('SELECT limits_in_function()'),
	'1GB 100MB',
	"a function's SET clauses hard_limit 100MB, then byte_limit 1GB: taken");

$s->query('RESET ssl_renegotiate.byte_limit');
$s->query('SET ssl_renegotiate.interval TO DEFAULT');
is( state_of($s),
	join("\n",
		"byte_limit|2MB|2048|kB|integer|$file|1",
		'hard_limit|64MB|65536|kB|integer|session',
		"interval|1s|1|s|integer|$file|3",
		"tls12|terminate|terminate|enum|$file|4",
		'row ' . (2 * MB) . ' ' . (66 * MB) . ' 00:00:01 terminate'),
	'RESET, SET TO DEFAULT: the file\'s values back, the row enforces 66MB');
$s->quit;

# ---------------------------------------------------------------------
# 3. ALTER SYSTEM + reload
# ---------------------------------------------------------------------
my $big = session(dbname => 'bigdb');
$big->query(q{ALTER SYSTEM SET ssl_renegotiate.hard_limit = '65MB'});
$big->quit;
like(
	slurp_file($node->data_dir . '/postgresql.auto.conf'),
	qr/^ssl_renegotiate\.hard_limit = '65MB'$/m,
	'ALTER SYSTEM SET hard_limit 65MB from a database with byte_limit 1GB: taken'
);
$node->safe_psql('postgres',
	q{ALTER SYSTEM SET ssl_renegotiate.interval = '2min'});
reload_until(q{SELECT current_setting('ssl_renegotiate.interval') = '2min'});
$s = session();
is( state_of($s),
	join("\n",
		"byte_limit|2MB|2048|kB|integer|$file|1",
		"hard_limit|65MB|66560|kB|integer|$auto|3",
		"interval|2min|120|s|integer|$auto|4",
		"tls12|terminate|terminate|enum|$file|4",
		'row ' . (2 * MB) . ' ' . (66 * MB) . ' 00:02:00 terminate'),
	'ALTER SYSTEM + reload: pg_settings names postgresql.auto.conf, the row enforces 66MB'
);
$s->quit;
$node->safe_psql(
	'postgres', q{
ALTER SYSTEM RESET ssl_renegotiate.hard_limit;
ALTER SYSTEM RESET ssl_renegotiate.interval;
});

# ---------------------------------------------------------------------
# 4. The 1.0 name in conf.d/
# ---------------------------------------------------------------------
set_dba_conf("ssl_renegotiate.limit = '4MB'\n");
$offset = -s $node->logfile;
$node->reload;
# the postmaster has read the file once it says so; new sessions see it
$node->wait_for_log(qr/parameter "ssl_renegotiate\.limit" changed/, $offset);
my $alias_state = join("\n",
	"byte_limit|4MB|4096|kB|integer|$file|1",
	'hard_limit|0|0|kB|integer|default',
	'interval|0|0|s|integer|default',
	'tls12|warn|warn|enum|default',
	'row ' . (4 * MB) . ' NULL NULL warn');
$s = session();
is(state_of($s), $alias_state,
	'ssl_renegotiate.limit in conf.d/dba.conf, at a reload: byte_limit is 4MB, from that line, everywhere'
);
$s->quit;
like(
	slurp_file($node->logfile, $offset),
	qr/WARNING:  ssl_renegotiate\.limit sets ssl_renegotiate\.byte_limit to 4MB\n.*DETAIL:  ssl_renegotiate\.limit \(\S+\/conf\.d\/dba\.conf, line 1\) is the name/,
	'... and the WARNING names conf.d/dba.conf, line 1');

$offset = -s $node->logfile;
$node->restart;
$s = session();
is(state_of($s), $alias_state, '... and the same after a restart');
$s->quit;
my $log = slurp_file($node->logfile, $offset);
my @warnings = $log =~
  /WARNING:  ssl_renegotiate\.limit sets ssl_renegotiate\.byte_limit to 4MB\n.*DETAIL:  ssl_renegotiate\.limit \(\S+\/conf\.d\/dba\.conf, line 1\)/g;
is(scalar @warnings,
	1, '... with one WARNING at start-up, naming conf.d/dba.conf, line 1');
like(
	$log,
	qr/HINT:  Rename it to ssl_renegotiate\.byte_limit in \S+\/conf\.d\/dba\.conf, line 1\./,
	'... whose hint names conf.d/dba.conf, not postgresql.conf');

set_dba_conf('');
reload_until(
	q{SELECT current_setting('ssl_renegotiate.byte_limit') = '512MB'});
$s = session();
like(
	state_of($s),
	qr/^byte_limit\|512MB\|524288\|kB\|integer\|default\n.*\nrow 536870912 /s,
	'the old name removed: byte_limit is back at its default');
$s->quit;

# ---------------------------------------------------------------------
# 5. Values refused at start-up, and at a reload
# ---------------------------------------------------------------------
set_dba_conf(
	"ssl_renegotiate.hard_limit = '1MB'\nssl_renegotiate.interval = '400ms'\n"
);
$offset = -s $node->logfile;
$node->restart;
$log = slurp_file($node->logfile, $offset);
like(
	$log,
	qr/WARNING:  ssl_renegotiate\.hard_limit cannot be 1MB: the smallest value other than 0 is 64MB\n.*\n.*HINT:  0 turns it off\. Until the value is mended, ssl_renegotiate\.hard_limit keeps its default \(0, off\)\./,
	'start-up with hard_limit = 1MB: a WARNING says it keeps its default');
like(
	$log,
	qr/WARNING:  ssl_renegotiate\.interval cannot be 400ms: the smallest value other than 0 is 1s\n.*\n.*HINT:  0 turns it off\. Until the value is mended, ssl_renegotiate\.interval keeps its default \(0, off\)\./,
	'start-up with interval = 400ms: a WARNING says it keeps its default');
is( sql(q{SELECT string_agg(concat_ws('|', name, setting, source), ',' ORDER BY name)
		  FROM pg_settings WHERE name IN ('ssl_renegotiate.hard_limit',
		    'ssl_renegotiate.interval', 'ssl_renegotiate.refused_settings')}),
	'ssl_renegotiate.hard_limit|0|default,ssl_renegotiate.interval|0|default,'
	  . 'ssl_renegotiate.refused_settings|2|default',
	'... both at their defaults, and refused_settings counts the 2 lines');
is( sql(q{SELECT setting FROM pg_settings WHERE name = 'ssl_renegotiate.refused_settings'},
		extra_params => [ '-U', 'regress_monitor' ]),
	'2',
	'... which a pg_monitor role (the exporter\'s) reads too');

set_dba_conf(
	"ssl_renegotiate.hard_limit = '1GB'\nssl_renegotiate.interval = '400ms'\n"
);
reload_until(q{SELECT current_setting('ssl_renegotiate.hard_limit') = '1GB'});
is(sql('SHOW ssl_renegotiate.refused_settings'),
	'1', 'hard_limit mended at a reload: 1 line refused');
set_dba_conf("ssl_renegotiate.hard_limit = '2MB'\n");
$offset = -s $node->logfile;
$node->reload;
$node->wait_for_log(qr/contains errors; unaffected changes were applied/,
	$offset);
is( sql(q{SELECT current_setting('ssl_renegotiate.hard_limit') || ' '
		  || current_setting('ssl_renegotiate.interval') || ' '
		  || current_setting('ssl_renegotiate.refused_settings')}),
	'1GB 0 1',
	'hard_limit = 2MB at a reload: 1GB stays, interval gone from the file, 1 line refused'
);
set_dba_conf('');
reload_until(q{SELECT current_setting('ssl_renegotiate.hard_limit') = '0'});
is(sql('SHOW ssl_renegotiate.refused_settings'),
	'0', 'lines removed: none refused');

$node->stop;
done_testing();
