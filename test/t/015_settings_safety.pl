
# Settings that cannot silently switch protection off (issue 19), where
# pg_regress cannot reach: the configuration files and real sessions.
#  1. A refused file value keeps the old one, with PostgreSQL's LOG line;
#     at start-up, a WARNING and the default.
#  2. The 1.0 name ssl_renegotiate.limit in postgresql.conf and in
#     postgresql.auto.conf sets byte_limit in force (rotations show it),
#     with one WARNING from the postmaster that names its file and line and
#     the new name; when byte_limit is set too, it wins and the WARNING
#     says so.  (test/t/018 checks that SHOW and pg_settings say the same.)
#  3. The safe rule: hard_limit from ALTER ROLE and byte_limit from ALTER
#     DATABASE, hard below byte.  A LOG line names both values and their
#     levels, and a COPY TO beyond the hard limit as set completes over
#     TLS with rotations counted and an equal checksum, instead of a FATAL.
#  4. A small hard_limit cannot refuse every TLS login.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $MB = 1024 * 1024;

my $node = new_tls_node('settings_safety',
	conf => "include_if_exists = 'sslr_015.conf'");
my $include = $node->data_dir . '/sslr_015.conf';
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

# Replaces the included file's contents.
sub set_file_conf
{
	my ($text) = @_;
	open(my $fh, '>', $include) or die "cannot write $include: $!";
	print $fh "$text\n";
	close $fh;
	return;
}

sub reload_and_wait
{
	my ($name, $expect) = @_;
	my $offset = -s $node->logfile;
	$node->reload;
	# the postmaster has read the file once a new session sees it, or
	# once it has logged the file's errors
	$node->wait_for_log(qr/parameter "\Q$name\E" changed|contains errors/,
		$offset);
	$node->poll_query_until('postgres',
		"SELECT current_setting('$name') = '$expect'")
	  or die "$name is not $expect";
	return $offset;
}

# psql over TLS 1.3; returns (exit code, stdout, stderr).
sub run_tls_psql
{
	my ($sql, %opts) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'psql', '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			'-d', tls_connstr($node, tls => '1.3', %opts),
			'-f', '-'
		],
		'<',
		\$sql,
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return ($? >> 8, $out, $err);
}

# A COPY TO of $rows rows of 1 kB over TLS 1.3 into a file; returns the
# exit code, the file's MD5, its rekeys_sent and stderr.
sub copy_to_file
{
	my ($rows, %opts) = @_;
	my $file = $node->basedir . '/copy_015.txt';
	unlink $file;
	my ($rc, $out, $err) = run_tls_psql(
		qq{\\copy (SELECT i, md5(i::text) || repeat('x', 1000) FROM generate_series(1, $rows) i) to '$file'
SELECT rekeys_sent FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();
}, %opts);
	my $md5 = -e $file ? file_md5($file) : '';
	my ($rekeys) = $out =~ /^(\d+)$/m;
	return ($rc, $md5, $rekeys // -1, $err);
}

# ---------------------------------------------------------------------
# 1. File values
# ---------------------------------------------------------------------
set_file_conf(
	"ssl_renegotiate.byte_limit = '128kB'\nssl_renegotiate.interval = '1h'");
reload_and_wait('ssl_renegotiate.byte_limit', '128kB');

for my $bad (
	[
		'ssl_renegotiate.byte_limit',
		q{'100B'},
		'128kB',
		qr/ssl_renegotiate\.byte_limit cannot be 100B: the smallest value other than 0 is 1kB/
	],
	[
		'ssl_renegotiate.interval',
		q{'400ms'},
		'1h',
		qr/ssl_renegotiate\.interval cannot be 400ms: the smallest value other than 0 is 1s/
	],
	[
		'ssl_renegotiate.hard_limit',
		q{'1kB'},
		'0',
		qr/ssl_renegotiate\.hard_limit cannot be 1kB: the smallest value other than 0 is 64MB/
	])
{
	my ($name, $value, $old, $msg) = @$bad;
	my $others = join(
		"\n",
		grep { !/^\Q$name\E / } (
			"ssl_renegotiate.byte_limit = '128kB'",
			"ssl_renegotiate.interval = '1h'"));
	set_file_conf("$others\n$name = $value");
	my $offset = -s $node->logfile;
	$node->reload;
	ok( $node->wait_for_log(
			qr/contains errors; unaffected changes were applied/, $offset),
		"file $name = $value: the reload reports the file's error");
	my $log = slurp_file($node->logfile, $offset);
	like($log, qr/LOG:  $msg/,
		"file $name = $value: LOG line with the smallest value");
	like(
		$log,
		qr/HINT:  0 turns it off\./,
		"file $name = $value: ... and the hint");
	is($node->safe_psql('postgres', "SHOW $name"),
		$old, "file $name = $value: the old value stays");
}

# at start-up a refused value leaves the default, with a WARNING
set_file_conf("ssl_renegotiate.byte_limit = '511B'");
my $offset = -s $node->logfile;
$node->restart;
like(
	slurp_file($node->logfile, $offset),
	qr/WARNING:  ssl_renegotiate\.byte_limit cannot be 511B/,
	'start-up with byte_limit = 511B: WARNING');
is($node->safe_psql('postgres', 'SHOW ssl_renegotiate.byte_limit'),
	'512MB', 'start-up with byte_limit = 511B: the default, not off');

# ---------------------------------------------------------------------
# 2. The 1.0 name
# ---------------------------------------------------------------------
my $ROWS = 2000;    # about 2 MB
my $expect_md5;
{
	my $file = $node->basedir . '/copy_015.txt';
	$node->safe_psql('postgres',
		qq{COPY (SELECT i, md5(i::text) || repeat('x', 1000) FROM generate_series(1, $ROWS) i) TO '$file'}
	);
	$expect_md5 = file_md5($file);
}

# the default: no rotation in 2 MB
my ($rc, $md5, $rekeys) = copy_to_file($ROWS);
is($rekeys, 0, 'default byte_limit: no rotation in a 2 MB COPY TO');

for my $where ('postgresql.conf', 'postgresql.auto.conf')
{
	if ($where eq 'postgresql.conf')
	{
		set_file_conf("ssl_renegotiate.limit = '64kB'");
	}
	else
	{
		set_file_conf('');
		$node->append_conf('postgresql.auto.conf',
			"ssl_renegotiate.limit = '64kB'\n");
	}
	$offset = -s $node->logfile;
	$node->restart;
	($rc, $md5, $rekeys) = copy_to_file($ROWS);
	copy_to_file(10) for 1 .. 2;    # more backends, no more WARNINGs
	my $log = slurp_file($node->logfile, $offset);
	my @warnings = $log =~
	  /WARNING:  ssl_renegotiate\.limit sets ssl_renegotiate\.byte_limit to 64kB/g;
	is(scalar @warnings,
		1, "limit in $where: one WARNING, from the postmaster");
	my $file = $where eq 'postgresql.conf' ? 'sslr_015.conf' : $where;
	like(
		$log,
		qr/DETAIL:  ssl_renegotiate\.limit \(\S*\/\Q$file\E, line \d+\) is the name ssl_renegotiate\.byte_limit had before version 1\.1; it is read until version 2\.0\./,
		"limit in $where: the WARNING names its file and line, the new name and when the old one goes"
	);
	unlike(
		$log,
		qr/invalid configuration parameter name "ssl_renegotiate\.limit"/,
		"limit in $where: not removed as an unknown name");
	is($rc, 0, "limit in $where: COPY TO completes");
	is($md5, $expect_md5, "limit in $where: ... with an equal checksum");
	cmp_ok($rekeys, '>=', 20,
		"limit in $where: byte_limit in force is 64kB ($rekeys rotations in 2 MB)"
	);
}
$node->safe_psql('postgres', q{ALTER SYSTEM RESET ssl_renegotiate."limit"});
unlike(slurp_file($node->data_dir . '/postgresql.auto.conf'),
	qr/ssl_renegotiate\.limit/, 'ALTER SYSTEM RESET removes the old name');

# both set: byte_limit wins
set_file_conf(
	"ssl_renegotiate.limit = '64kB'\nssl_renegotiate.byte_limit = 0");
$offset = -s $node->logfile;
$node->restart;
($rc, $md5, $rekeys) = copy_to_file($ROWS);
like(
	slurp_file($node->logfile, $offset),
	qr/WARNING:  ssl_renegotiate\.limit is ignored: ssl_renegotiate\.byte_limit is set too, and wins/,
	'limit and byte_limit: the WARNING says byte_limit wins');
is($rekeys, 0,
	'limit and byte_limit: byte_limit = 0 is in force (no rotation)');

# ---------------------------------------------------------------------
# 3. The safe rule across levels that only meet in a session
# ---------------------------------------------------------------------
set_file_conf('');
$node->reload;
$node->safe_psql(
	'postgres', q{
CREATE ROLE regress_hard LOGIN SUPERUSER;
CREATE DATABASE regress_bytes;
ALTER ROLE regress_hard SET ssl_renegotiate.hard_limit = '64MB';
ALTER DATABASE regress_bytes SET ssl_renegotiate.byte_limit = '70MB';
});
$node->safe_psql('regress_bytes', 'CREATE EXTENSION ssl_renegotiate');

my $BIG = 80 * 1024;    # rows of about 1 kB: 80 MB, beyond both limits
{
	my $file = $node->basedir . '/copy_015.txt';
	$node->safe_psql('postgres',
		qq{COPY (SELECT i, md5(i::text) || repeat('x', 1000) FROM generate_series(1, $BIG) i) TO '$file'}
	);
	$expect_md5 = file_md5($file);
}
$offset = -s $node->logfile;
my $err;
($rc, $md5, $rekeys, $err) =
  copy_to_file($BIG, user => 'regress_hard', dbname => 'regress_bytes');
is($rc, 0,
	'hard_limit 64MB (role) below byte_limit 70MB (database): an 80 MB COPY TO completes'
) or diag($err);
unlike($err, qr/FATAL/, '... with no FATAL');
is($md5, $expect_md5, '... with an equal checksum');
cmp_ok($rekeys, '>=', 1, "... and a rotation at byte_limit ($rekeys)");
my $log = slurp_file($node->logfile, $offset);
like(
	$log,
	qr/LOG:  ssl_renegotiate: pid \d+ enforces ssl_renegotiate\.hard_limit as 134MB, not 64MB/,
	'the safe rule is logged with the hard limit in force');
like(
	$log,
	qr/DETAIL:  ssl_renegotiate\.hard_limit is 64MB \(from ALTER ROLE SET\), ssl_renegotiate\.byte_limit is 70MB \(from ALTER DATABASE SET\)/,
	'... naming both values and the level each came from');

# ---------------------------------------------------------------------
# 4. No hard_limit refuses every TLS login
# ---------------------------------------------------------------------
$node->safe_psql('postgres', 'ALTER ROLE regress_hard RESET ALL');
set_file_conf("ssl_renegotiate.hard_limit = '1kB'");
$offset = -s $node->logfile;
$node->restart;
like(
	slurp_file($node->logfile, $offset),
	qr/WARNING:  ssl_renegotiate\.hard_limit cannot be 1kB/,
	'start-up with hard_limit = 1kB: refused with a WARNING');
($rc, my $out) = run_tls_psql('SELECT 1');
is("$rc $out", "0 1\n", 'start-up with hard_limit = 1kB: a TLS login works');

# the smallest hard limit, with rotation by bytes off: a login and a
# query, several times the handshake, stay far below it
set_file_conf(
	"ssl_renegotiate.byte_limit = 0\nssl_renegotiate.hard_limit = '64MB'");
reload_and_wait('ssl_renegotiate.hard_limit', '64MB');
($rc, $out) = run_tls_psql(q{SELECT count(*) FROM generate_series(1, 1000)});
is("$rc $out", "0 1000\n",
	'hard_limit = 64MB, byte_limit = 0: a TLS login and query work');
($rc, $out) =
  run_tls_psql('SELECT 1', user => 'regress_hard', dbname => 'regress_bytes');
is("$rc $out", "0 1\n", '... also with byte_limit from the database');

# ---------------------------------------------------------------------
# 5. One message larger than the margin: a rotation, not an end
# ---------------------------------------------------------------------
# Nothing rotates inside a message, so a 70 MB row goes out under one key,
# past hard_limit; at the next send point the due rotation comes first.
set_file_conf(
	"ssl_renegotiate.byte_limit = '1MB'\nssl_renegotiate.hard_limit = '65MB'"
);
reload_and_wait('ssl_renegotiate.hard_limit', '65MB');
my $ROW = 70 * 1024 * 1024;
($rc, $out, $err) = run_tls_psql(
	qq{SELECT length(r), md5(r) = md5(repeat('x', $ROW)), r FROM (SELECT repeat('x', $ROW) r) s;
SELECT rekeys_sent FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();
});
is($rc, 0, 'a 70 MB row with hard_limit 65MB: the session goes on')
  or diag($err);
unlike($err, qr/FATAL/, '... with no FATAL');
my @lines = split /\n/, $out;
is( length($lines[0] // ''),
	length("$ROW|t|") + $ROW,
	'... the whole row arrived');
cmp_ok($lines[1] // 0, '>=', 1, '... and the send key rotated after it');

$node->stop;
done_testing();
