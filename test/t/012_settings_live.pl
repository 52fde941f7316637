
# ssl_renegotiate's settings reach the sessions they should, and only
# superusers can change them:
#  - ALTER SYSTEM + pg_reload_conf() reaches a live TLS session (both ways);
#  - ALTER ROLE / ALTER DATABASE ... SET apply to new sessions, with the
#    usual precedence, and change how often keys rotate;
#  - a non-superuser can neither SET nor ALTER SYSTEM / ROLE / DATABASE
#    them, nor pass them as startup options (42501);
#  - a bad value is 22023; core's dummy ssl_renegotiation_limit still works.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

# One fixed COPY TO, ~8 MB in 1005-byte CopyData messages.
my $COPY_ROWS = 8000;
my $COPY =
  "\\copy (SELECT repeat('x', 1000) FROM generate_series(1, $COPY_ROWS)) to '/dev/null'";
my $MAX_MSG = 1 + 4 + 1001;

my $node = new_tls_node('settings');
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION ssl_renegotiate;
CREATE ROLE regress_r LOGIN;
CREATE DATABASE regress_db OWNER regress_r;
});

# psql over TLS without ON_ERROR_STOP; returns (exit code, stdout, stderr).
sub run_psql
{
	my ($cs, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'psql', '-X', '-A', '-t', '-d', $cs, '-f', '-' ],
		'<',
		\$sql,
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return ($? >> 8, $out, $err);
}

# A TLS 1.3 BackgroundPsql session; returns (session, backend pid).
sub tls_session
{
	my (%opts) = @_;
	my $s =
	  background_tls_psql($node, tls_connstr($node, tls => '1.3', %opts));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	die "no backend pid" unless $pid =~ /^\d+$/;
	return ($s, $pid);
}

sub show_limit
{
	my ($s) = @_;
	return $s->query_safe('SHOW ssl_renegotiate.byte_limit');
}

# Runs the fixed COPY TO in $s; returns the growth of bytes_sent and
# rekeys_sent of backend $pid, and its row afterwards.
sub copy_rekeys
{
	my ($s, $pid) = @_;
	wait_idle($node, $pid) or die "backend $pid not idle";
	my $before = activity_row($node, $pid);
	$s->query_safe($COPY);
	wait_idle($node, $pid) or die "backend $pid not idle";
	my $after = activity_row($node, $pid);
	return ($after->{bytes_sent} - $before->{bytes_sent},
		$after->{rekeys_sent} - $before->{rekeys_sent}, $after);
}

# Rotations a COPY of $bytes must and may cause at $limit bytes per key.
sub check_rekeys
{
	my ($what, $limit, $bytes, $rekeys) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $bound = send_key_bound($limit, $MAX_MSG);
	cmp_ok(
		$rekeys, '>=',
		int($bytes / $bound) - 1,
		"$what: rekeys_sent >= bytes_sent / $bound");
	cmp_ok(
		$rekeys, '<=',
		int($bytes / $limit) + 1,
		"$what: rekeys_sent <= bytes_sent / $limit + 1");
}

sub reload_system_limit
{
	my ($sql, $expect) = @_;
	$node->safe_psql('postgres', "$sql; SELECT pg_reload_conf();");
	# Once a new backend sees the value, the postmaster has re-read the
	# file and signalled every backend.
	$node->poll_query_until('postgres',
		"SELECT current_setting('ssl_renegotiate.byte_limit') = '$expect'")
	  or die "reload to $expect not seen";
}

# ---------------------------------------------------------------------
# ALTER SYSTEM + reload reaches a live session
# ---------------------------------------------------------------------
my ($s, $pid) = tls_session();
is(show_limit($s), '512MB', 'live session starts with the default limit');
my ($bytes, $rekeys) = copy_rekeys($s, $pid);
cmp_ok($bytes, '>', $COPY_ROWS * 1001, 'COPY TO sent the data');
is($rekeys, 0, 'default limit: the COPY did not rotate');

# a role's session opened now keeps what it started with
my ($s_old, $pid_old) = tls_session(user => 'regress_r');

reload_system_limit(q{ALTER SYSTEM SET ssl_renegotiate.byte_limit = '64kB'},
	'64kB');
is(show_limit($s), '64kB',
	'ALTER SYSTEM + pg_reload_conf(): the live session sees 64kB');
($bytes, $rekeys) = copy_rekeys($s, $pid);
note "live session at 64kB: $bytes bytes, $rekeys rekeys_sent";
check_rekeys('live session after reload, 64kB', 65536, $bytes, $rekeys);
my $rekeys64 = $rekeys;

# ---------------------------------------------------------------------
# ALTER ROLE / ALTER DATABASE: new sessions
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	q{ALTER ROLE regress_r SET ssl_renegotiate.byte_limit = '128kB'});
$node->safe_psql('postgres',
	q{ALTER DATABASE regress_db SET ssl_renegotiate.byte_limit = '256kB'});

is(show_limit($s_old), '64kB',
	'ALTER ROLE does not change a session already open (it has the reloaded system value)'
);

my ($sr, $pid_r) = tls_session(user => 'regress_r');
is(show_limit($sr), '128kB',
	'ALTER ROLE ... SET: the role\'s new session has 128kB');
($bytes, $rekeys) = copy_rekeys($sr, $pid_r);
note "role session at 128kB: $bytes bytes, $rekeys rekeys_sent";
check_rekeys('role session, 128kB', 131072, $bytes, $rekeys);
my $ratio = $rekeys / ($rekeys64 || 1);
note "rekeys at 128kB / rekeys at 64kB = $ratio";
cmp_ok($ratio, '>=', 0.4,
	'role at 128kB: about half the rotations of 64kB (>= 0.4)');
cmp_ok($ratio, '<=', 0.6,
	'role at 128kB: about half the rotations of 64kB (<= 0.6)');

my ($sd, $pid_d) = tls_session(dbname => 'regress_db');
is(show_limit($sd), '256kB',
	'ALTER DATABASE ... SET: a new session in it has 256kB');
($bytes, $rekeys) = copy_rekeys($sd, $pid_d);
note "database session at 256kB: $bytes bytes, $rekeys rekeys_sent";
check_rekeys('database session, 256kB', 262144, $bytes, $rekeys);

my ($srd, $pid_rd) = tls_session(user => 'regress_r', dbname => 'regress_db');
is(show_limit($srd), '128kB',
	'role and database settings: the role\'s wins in the database');
$srd->quit;

# ---------------------------------------------------------------------
# Non-superusers cannot change them
# ---------------------------------------------------------------------
my @attempts = (
	q{SET ssl_renegotiate.byte_limit = 0},
	q{SET ssl_renegotiate.interval = 0},
	q{SET ssl_renegotiate.hard_limit = 0},
	q{SET ssl_renegotiate.tls12 = 'warn'},
	q{SET ssl_renegotiate.log_rekeys = off},
	q{SET ssl_renegotiate.max_peer_key_updates = 0},
	q{SET LOCAL ssl_renegotiate.byte_limit = 0},
	q{RESET ssl_renegotiate.byte_limit},
	q{SELECT set_config('ssl_renegotiate.byte_limit', '0', false)},
	q{ALTER SYSTEM SET ssl_renegotiate.byte_limit = 0},
	q{ALTER ROLE regress_r SET ssl_renegotiate.byte_limit = 0},
	q{ALTER ROLE regress_r IN DATABASE regress_db SET ssl_renegotiate.byte_limit = 0},
	q{ALTER DATABASE regress_db SET ssl_renegotiate.byte_limit = 0});
my $sql_r = '';
for my $i (0 .. $#attempts)
{
	$sql_r .= "$attempts[$i];\n\\echo 'sqlstate:$i:' :SQLSTATE\n";
}
$sql_r .=
  "SELECT 'limit:' || current_setting('ssl_renegotiate.byte_limit');\n";
my ($rc, $out, $err) =
  run_psql(tls_connstr($node, user => 'regress_r', dbname => 'regress_db'),
	$sql_r);
for my $line (split /\n/, $out)
{
	next unless $line =~ /^sqlstate:(\d+):\s*(\S+)$/;
	is($2, '42501', "non-superuser: $attempts[$1] -> 42501");
}
my $n42501 = () = $out =~ /^sqlstate:\d+:\s*42501$/mg;
is($n42501, scalar @attempts, 'non-superuser: every attempt refused');
like($out, qr/^limit:128kB$/m, 'non-superuser: the value is still 128kB');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM pg_db_role_setting, unnest(setconfig) c WHERE c LIKE 'ssl_renegotiate.%'}
	),
	'2',
	'non-superuser: pg_db_role_setting unchanged (the two settings made above)'
);
unlike(
	slurp_file($node->data_dir . '/postgresql.auto.conf'),
	qr/limit = '0'/,
	'non-superuser: postgresql.auto.conf unchanged');

# startup options
($rc, $out, $err) = run_psql(
	tls_connstr(
		$node,
		user => 'regress_r',
		extra => q{options='-c ssl_renegotiate.byte_limit=0'}),
	"SELECT 'connected';\n");
isnt($rc, 0,
	'non-superuser: -c ssl_renegotiate.byte_limit=0 in options is refused');
like(
	$err,
	qr/permission denied to set parameter "ssl_renegotiate.byte_limit"/,
	'non-superuser: ... permission denied to set parameter');
($rc, $out, $err) = run_psql(
	tls_connstr($node, extra => q{options='-c ssl_renegotiate.byte_limit=0'}),
	"SELECT 'limit:' || current_setting('ssl_renegotiate.byte_limit');\n");
like($out, qr/^limit:0$/m, 'superuser: the same startup option is accepted');

# ---------------------------------------------------------------------
# Bad value; core's dummy setting
# ---------------------------------------------------------------------
($rc, $out, $err) = run_psql(
	tls_connstr($node), q{SET ssl_renegotiate.byte_limit = -1;
\echo 'sqlstate:' :SQLSTATE
SHOW ssl_renegotiate.byte_limit;
SHOW ssl_renegotiation_limit;
});
like($out, qr/^sqlstate: 22023$/m, 'bad value: 22023');
like(
	$err,
	qr/ssl_renegotiate\.byte_limit cannot be -1kB: the smallest value other than 0 is 1kB\n.*HINT:  0 turns it off\./,
	'bad value: the message says why, in the units typed');
like($out, qr/^64kB\n0$/m,
	'bad value left the setting alone; SHOW ssl_renegotiation_limit (core) still works'
);

# ---------------------------------------------------------------------
# And back: ALTER SYSTEM RESET + reload reaches the live session too
# ---------------------------------------------------------------------
reload_system_limit(q{ALTER SYSTEM RESET ssl_renegotiate.byte_limit},
	'512MB');
is(show_limit($s), '512MB',
	'ALTER SYSTEM RESET + reload: the live session is back at 512MB');
($bytes, $rekeys) = copy_rekeys($s, $pid);
is($rekeys, 0, 'back at 512MB: the COPY did not rotate');
# the role and database settings are still there
is(show_limit($sr), '128kB', 'the role session keeps its role setting');
($bytes, $rekeys) = copy_rekeys($sr, $pid_r);
check_rekeys('role session after the system reset, 128kB',
	131072, $bytes, $rekeys);

$_->quit for ($s, $s_old, $sr, $sd);
$node->stop;
done_testing();
