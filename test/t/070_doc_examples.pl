# The documentation's examples, run: every SQL example of README.md and
# docs/*.md (test/t/DocExamples.pm), and the shell examples that need a running
# server of the suite's own.
#
# What this proves:
#
#  1. The README's "make installcheck" runs, as shown, against a running
#     server that preloads the library (shell example "installcheck"), over
#     its Unix socket as a Debian cluster's would be; it refuses a server
#     where an ALTER ROLE setting would change the tests' sessions.
#  2. The alert rules check and pass their unit tests as the Monitoring
#     document shows (shell example "alert-rules", output compared).
#  3. Every SQL example runs without an error over TLS, in a database of
#     its document's own, each after the one before it in that document;
#     one whose output is shown prints that output (numbers aside: see
#     DocExamples::output_mismatch), an ERROR included where one is shown.
#     ALTER SYSTEM is undone after each example, so each starts from the
#     defaults.
#
# The roles and the database the examples name (app, etl, pooler,
# prometheus's own is made by its example; appdb) are made first, and a TLS
# session of the application "nightly_export" is connected throughout, so
# that the examples that look for sessions find one.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use Cwd 'getcwd';
use File::Temp 'tempdir';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;
use DocExamples qw(examples doc_files output_mismatch);

my $top = getcwd();

# max_connections as docs/reference.md's shared memory example says
my $node =
  new_tls_node('docs', real_pace => 1, conf => 'max_connections = 100');
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE ROLE app LOGIN;
CREATE ROLE etl LOGIN;
CREATE ROLE pooler LOGIN;
CREATE DATABASE appdb;
});

# ------------------------------------------- 1. make installcheck, as shown
{
	my $copy = tempdir('sslr-docs-XXXXXX', TMPDIR => 1, CLEANUP => 1);
	# the tree without what other TAP files are writing meanwhile
	system(
		"tar -C '$top' --exclude='./tmp_check*' --exclude=./results --exclude=./log -cf - . | tar -C '$copy' -xf -"
	  ) == 0
	  or die "cannot copy the tree";
	# the node in place of a Debian cluster's defaults (its socket, its port)
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	delete local $ENV{PGDATABASE};
	delete local $ENV{PGUSER};
	my ($ok, $out) = run_shell_example($copy, 'installcheck');
	ok($ok, 'the README\'s make installcheck passes on a running server')
	  or diag($out);
	like($out, qr/All \d+ tests passed/, 'make installcheck ran its tests');

	# a role setting the tests' sessions would get: refused, named (a run
	# meant to fail: not recorded in scripts/doc_examples.pl's log, whose
	# check counts every FAILED line)
	$node->safe_psql('postgres',
		q{ALTER ROLE CURRENT_USER SET ssl_renegotiate.byte_limit = '1MB'});
	{
		delete local $ENV{SSLR_DOC_EXAMPLES_LOG};
		($ok, $out) = run_shell_example($copy, 'installcheck');
	}
	$node->safe_psql('postgres',
		q{ALTER ROLE CURRENT_USER RESET ssl_renegotiate.byte_limit});
	ok(!$ok,
		'make installcheck refuses a server whose ALTER ROLE setting reaches its sessions'
	);
	like(
		$out,
		qr/make installcheck: ALTER ROLE \S+ SET ssl_renegotiate\.byte_limit=1MB applies to the tests' sessions/,
		'... and names the setting');
}

# ------------------------------------------- 2. the alert rules, as shown
{
	my ($ok, $out) = run_shell_example($top, 'alert-rules');
	ok($ok,
		'promtool checks and tests the alert rules as docs/monitoring.md shows'
	) or diag($out);
}

# ------------------------------------------- 3. every SQL example
my $session = background_tls_psql($node,
	tls_connstr($node, application_name => 'nightly_export'));
$session->query_safe('SELECT 1');

my %db_of;
my $n = 0;
for my $file (doc_files($top))
{
	my @sql =
	  grep { $_->{file} eq $file && $_->{lang} eq 'sql' } examples($top);
	next unless @sql;
	(my $db = 'doc_' . lc($file)) =~ s/\W+/_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	# a document that shows CREATE EXTENSION runs it itself
	$node->safe_psql($db, 'CREATE EXTENSION ssl_renegotiate')
	  unless grep { $_->{body} =~ /^\s*CREATE EXTENSION ssl_renegotiate\b/m }
	  @sql;
	for my $ex (@sql)
	{
		my $where = "$ex->{file}:$ex->{line}";
		my $errors_shown =
		  defined $ex->{expected} && $ex->{expected} =~ /^ERROR:/m;
		my ($status, $out) = run_sql($db, $ex->{body}, !$errors_shown);
		if ($errors_shown)
		{
			pass("$where runs (its ERROR is part of the example)");
		}
		else
		{
			is($status, 0, "$where runs without an error") or diag($out);
		}
		if (defined $ex->{expected})
		{
			my $mismatch = output_mismatch($ex->{expected}, $out);
			ok(!defined $mismatch, "$where prints the output shown")
			  or diag("$mismatch\n--- printed:\n$out");
		}
		undo_alter_system();
		$n++;
	}
}
cmp_ok($n, '>=', 20, "the documents have their SQL examples ($n)");

$session->quit;
$node->stop;
done_testing();

# psql over TLS, the example on its standard input; (exit status, stdout
# and stderr as printed)
sub run_sql
{
	my ($db, $sql, $stop_on_error) = @_;
	my @cmd = ('psql', '-X', '-q', '-d', tls_connstr($node, dbname => $db));
	push @cmd, '-v', 'ON_ERROR_STOP=1' if $stop_on_error;
	my $out = '';
	IPC::Run::run(\@cmd, '<', \$sql, '>&', \$out);
	return ($? >> 8, $out);
}

# a shell example of the tree at $dir, through its doc_examples.pl
sub run_shell_example
{
	my ($dir, $name) = @_;
	my $out = '';
	IPC::Run::run([ 'perl', "$dir/scripts/doc_examples.pl", 'run', $name ],
		'>&', \$out);
	return ($? == 0, $out);
}

# the examples' ALTER SYSTEM undone, and in force for the next session
sub undo_alter_system
{
	$node->safe_psql('postgres',
		'ALTER SYSTEM RESET ALL; SELECT pg_reload_conf()');
	$node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 0 FROM pg_settings
		  WHERE starts_with(name, 'ssl_renegotiate.') AND source = 'configuration file'
		    AND sourcefile LIKE '%postgresql.auto.conf'}
	) or die 'ALTER SYSTEM RESET ALL not in force';
}
