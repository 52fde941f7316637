
# Copyright (c) 2026, ssl_renegotiate developers
#
# Rekeying against a client on another TLS implementation: pgjdbc over
# Java's JSSE (Debian: libpostgresql-jdbc-java, default-jdk-headless).
#
# test/t/java/CopyRoundTrip.java, compiled here with javac, connects with
# sslmode=require, COPYs 32 MB out and 32 MB in with pgjdbc's CopyManager,
# and prints checksums, its backend pid and its own ssl_renegotiate_activity
# row.  With ssl_renegotiate.byte_limit = 64kB:
#
#   TLS 1.3  the server rotates its sending key with KeyUpdate and asks JSSE
#            to rotate its own (KeyUpdate, update_requested): data intact,
#            both directions rotated; how quickly JSSE answers shows in
#            max_received_per_key.
#   TLS 1.2  with ssl_renegotiate.tls12 = renegotiate the server sends
#            HelloRequests; JSSE takes part in secure renegotiation (RFC
#            5746), so the policy outcome is that of a renegotiating client:
#            data intact, both directions rotated, no failure.
#
# And with byte_limit = 0, hard_limit = 64MB, a 70 MB query parameter: the
# SQLException carries the server's FATAL and SQLState 53400.
#
# Skipped when java, javac or the pgjdbc jar is missing.

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $PGJDBC_JAR = $ENV{SSLR_PGJDBC_JAR} // '/usr/share/java/postgresql.jar';
my $SOURCE =
  File::Spec->rel2abs(dirname(__FILE__) . '/java/CopyRoundTrip.java');

for my $tool ('java', 'javac')
{
	plan
	  skip_all => "$tool is not installed (Debian: default-jdk-headless)"
	  unless grep { -x "$_/$tool" } split /:/,
	  $ENV{PATH};
}
plan skip_all =>
  "pgjdbc is not installed: no $PGJDBC_JAR (Debian: libpostgresql-jdbc-java)"
  unless -r $PGJDBC_JAR;
plan skip_all => "no $SOURCE" unless -r $SOURCE;

my $LIMIT = 64 * 1024;
my $ROWS = 300_000;    # about 32 MB each way
my $FILLER = 70;

my $tmp = PostgreSQL::Test::Utils::tempdir;

# Compile the client.
{
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[ 'javac', '-d', $tmp, '-cp', $PGJDBC_JAR, $SOURCE ],
		'<',
		\undef,
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	ok($ok, 'CopyRoundTrip.java compiles') or diag("javac: $out$err");
	BAIL_OUT('cannot compile the Java client') unless $ok;
	my $v = `java -version 2>&1`;
	note "java: "
	  . (split /\n/, $v)[0]
	  . "; pgjdbc: $PGJDBC_JAR -> "
	  . (readlink($PGJDBC_JAR) // $PGJDBC_JAR);
}

my $node = new_tls_node('jdbc',
	conf => "ssl_renegotiate.byte_limit = '64kB'\n"
	  . "ssl_renegotiate.tls12 = renegotiate\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION ssl_renegotiate;
CREATE TABLE copy_in (i int, s text);
});

# Run CopyRoundTrip over TLS $version ('1.2' or '1.3'), with more URL
# parameters and a query parameter of $param_bytes if given; returns a
# hashref of its key=value lines plus exit (exit status) and stderr.
sub run_java
{
	my ($version, $rows_out, $rows_in, $params, $param_bytes) = @_;
	my $url =
		'jdbc:postgresql://127.0.0.1:'
	  . $node->port
	  . '/postgres?user=postgres&sslmode=require'
	  . '&sslfactory=org.postgresql.ssl.NonValidatingFactory'
	  . '&gssEncMode=disable'
	  . "&ApplicationName=jdbc_tls$version"
	  . ($params // '');
	# C1 only and the serial collector: a short run on a small machine
	my @cmd = (
		'java', '-XX:TieredStopAtLevel=1',
		'-XX:+UseSerialGC', "-Djdk.tls.client.protocols=TLSv$version",
		'-cp', "$PGJDBC_JAR:$tmp",
		'CopyRoundTrip', $url,
		$rows_out, $rows_in,
		$FILLER, $param_bytes // 0);
	my ($out, $err) = ('', '');
	my %r;
	eval {
		IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		$r{exit} = $? >> 8;
	};
	if ($@)
	{
		$r{exit} = 'timeout';
		$r{run_error} = "$@";
	}
	for my $line (split /\n/, $out)
	{
		$r{$1} = $2 if $line =~ /^(\w+)=(.*)$/;
	}
	$r{stderr} = $err;
	$r{activity_row} =
	  defined $r{activity} ? JSON::PP::decode_json($r{activity}) : {};
	note "jdbc TLS $version: $_=$r{$_}"
	  for grep { $_ ne 'activity_row' } sort keys %r;
	return \%r;
}

sub row_summary
{
	my ($row) = @_;
	return join ', ',
	  map { "$_=" . ($row->{$_} // 'NULL') }
	  qw(version cipher bytes_sent bytes_received rekeys_sent rekeys_received
	  rekey_failures rekeys_skipped max_sent_per_key max_received_per_key
	  rekey_time rekey_pending);
}

my $out_md5 = series_copy_md5($node, $ROWS, $FILLER);

# limit + the largest protocol message (a CopyData row) + PostgreSQL's 8 kB
# send buffer, which may be flushed between two safe points
my $bound = $LIMIT + (5 + length("$ROWS\t") + 32 + $FILLER + 1) + 8192;

# ---------------------------------------------------------------------
# TLS 1.3: KeyUpdate both ways
# ---------------------------------------------------------------------
{
	my $label = 'jdbc TLS 1.3';
	$node->safe_psql('postgres', 'TRUNCATE copy_in');
	my $log = -s $node->logfile;
	my $r = run_java('1.3', $ROWS, $ROWS);
	my $row = $r->{activity_row};
	note "$label: " . row_summary($row);

	is($r->{exit}, 0, "$label: client finished without error");
	is($r->{tls_version}, 'TLSv1.3', "$label: connection uses TLS 1.3");
	cmp_ok(
		$r->{out_bytes} // 0,
		'>=',
		$ROWS * 100,
		"$label: COPY OUT received the whole data");
	is($r->{out_md5}, $out_md5, "$label: COPY OUT data intact (md5)");
	is($r->{in_rows}, $ROWS, "$label: COPY IN reports all rows");
	is( table_copy_md5($node, 'copy_in'),
		$ROWS . ' ' . ($r->{in_md5} // 'none'),
		"$label: COPY IN data intact (md5)");
	is($row->{version}, 'TLSv1.3', "$label: activity row is TLS 1.3");
	cmp_ok($row->{rekeys_sent}     // 0, '>', 0, "$label: rekeys_sent > 0");
	cmp_ok($row->{rekeys_received} // 0,
		'>', 0,
		"$label: rekeys_received > 0 (JSSE answers KeyUpdate requests)");
	is($row->{rekey_failures}, 0, "$label: rekey_failures = 0");
	cmp_ok($row->{max_sent_per_key} // 9e99,
		'<=', $bound, "$label: max_sent_per_key <= $bound");
	note "$label: JSSE answered KeyUpdate requests within "
	  . ($row->{max_received_per_key} // '?')
	  . " bytes under one key at most (limit $LIMIT); rekeys_received="
	  . ($row->{rekeys_received} // '?');

	my @trouble = grep {
		/SSL error|SSL SYSCALL|could not (?:send|receive) data|unexpected EOF|connection to client lost|terminat(?:ed|ing) connection|FATAL|PANIC/
	} split /\n/, slurp_file($node->logfile, $log);
	is(join("\n", @trouble), '', "$label: no SSL error nor FATAL logged");
}

# ---------------------------------------------------------------------
# TLS 1.3, hard_limit: a query whose parameter takes the client beyond it
# under one key is ended with a FATAL that pgjdbc receives (byte_limit = 0:
# the client is never asked to rotate).  Not a COPY: pgjdbc 42.5's
# CopyManager.copyIn drops an ErrorResponse that EOF follows, and its
# cancelCopy's failure replaces the exception.
# ---------------------------------------------------------------------
{
	my $label = 'jdbc TLS 1.3 hard_limit';
	my $log = -s $node->logfile;
	my $t0 = totals_row($node);
	my $r = run_java(
		'1.3',
		0,
		0,
		'&options=-c%20ssl_renegotiate.byte_limit%3D0%20-c%20ssl_renegotiate.hard_limit%3D64MB',
		70_000_000);
	my $pid = $r->{pid} // 0;

	isnt($r->{exit}, 0, "$label: the client failed");
	ok(!defined $r->{param_length}, "$label: the query was not answered");
	like(
		$r->{param_error} // '',
		qr/FATAL: terminating connection because more than ssl_renegotiate\.hard_limit was received under one TLS key/,
		"$label: the SQLException gives the server's reason");
	is($r->{param_sqlstate}, '53400',
		"$label: ... with SQLState 53400 (configuration_limit_exceeded)");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid")
	  or die "backend $pid did not exit";
	is(totals_row($node)->{terminations} - $t0->{terminations},
		1, "$label: totals.terminations grew by 1");
	my @lines = grep { /\[$pid\]/ } split /\n/,
	  slurp_file($node->logfile, $log);
	is( join(
			"\n",
			grep {
				/ERROR|FATAL|PANIC|unexpected EOF|connection to client lost/
			} @lines),
		join(
			"\n",
			grep {
				/FATAL:  terminating connection because more than ssl_renegotiate\.hard_limit was received/
			} @lines),
		"$label: the server log has the FATAL and no other error for the backend"
	);
	cmp_ok(scalar(grep { /FATAL/ } @lines), '==', 1, "$label: ... once");
}

# ---------------------------------------------------------------------
# TLS 1.2 with ssl_renegotiate.tls12 = renegotiate
# ---------------------------------------------------------------------
{
	my $label = 'jdbc TLS 1.2 renegotiate';
	$node->safe_psql('postgres', 'TRUNCATE copy_in');
	my $log = -s $node->logfile;
	my $t0 = totals_row($node);
	my $r = run_java('1.2', $ROWS, $ROWS);
	my $row = $r->{activity_row};
	note "$label: " . row_summary($row);
	my $t1 = totals_row($node);
	note "$label: totals delta: "
	  . join(', ',
		map { "$_=" . ($t1->{$_} - $t0->{$_}) }
		  qw(rekeys_sent rekeys_received rekey_failures terminations));
	my $server_log = slurp_file($node->logfile, $log);

	is($r->{tls_version}, 'TLSv1.2', "$label: connection uses TLS 1.2");

	# The documented outcome for a client that takes part in renegotiation
	# (JSSE implements RFC 5746 secure renegotiation and accepts a
	# server's HelloRequest): the data goes through intact and every
	# renegotiation rotates both directions.
	is($r->{exit}, 0, "$label: client finished without error");
	is($r->{out_md5}, $out_md5, "$label: COPY OUT data intact (md5)");
	is( table_copy_md5($node, 'copy_in'),
		$ROWS . ' ' . ($r->{in_md5} // 'none'),
		"$label: COPY IN data intact (md5)");
	ok(defined $r->{activity},
		"$label: session goes on after the COPYs (next query answered)")
	  or diag("client: " . ($r->{activity_error} // $r->{error} // '?'));
	cmp_ok($row->{rekeys_sent}     // 0, '>', 0, "$label: rekeys_sent > 0");
	cmp_ok($row->{rekeys_received} // 0,
		'>', 0, "$label: rekeys_received > 0");
	is( $row->{rekeys_received} // 'none',
		$row->{rekeys_sent}     // 'no row',
		"$label: each renegotiation counted in both directions");
	is($row->{rekey_failures}, 0, "$label: rekey_failures = 0");
	cmp_ok($row->{max_sent_per_key} // 9e99,
		'<=', $bound, "$label: max_sent_per_key <= $bound");
	unlike(
		$server_log,
		qr/client refused TLS renegotiation/,
		"$label: JSSE did not refuse renegotiation");

	my @trouble = grep {
		/SSL error|SSL SYSCALL|could not (?:send|receive) data|unexpected EOF|connection to client lost|terminat(?:ed|ing) connection|FATAL|PANIC/
	} split /\n/, $server_log;
	is(join("\n", @trouble), '', "$label: no SSL error nor FATAL logged");
}

$node->stop;
done_testing();
