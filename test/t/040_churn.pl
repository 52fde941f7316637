
# Connect/disconnect churn over TLS 1.3 with pgbench -C: the totals must be
# exact, no slot may leak, and the server log must stay clean.
#
# Every connection is made byte-identical (same client, same startup packet,
# same constant query, same TLS 1.3 cipher suite and certificate), so the
# totals after N connections can be predicted exactly from a calibration:
#
#   * pgbench always opens one extra "setup" connection of its own before
#     the run (it connects, reads the server version, disconnects: no
#     query), so a run of T transactions with -C makes T + 1 connections:
#     one setup connection (I) and T transaction connections (C);
#   * "pgbench -C -c 1 -t 1" gives  T1 = I + C   (2 connections),
#     "pgbench -C -c 1 -t 2" gives  T2 = I + 2C  (3 connections);
#     each is run 3 times and must be identical every time, then
#     C = T2 - T1 and I = T1 - C;
#   * C - I must be exactly one TLS record each way: the Query message and
#     the server's answer to SELECT 1 (checked to the byte below);
#   * a run of N transactions (-c 2 -t N/2) must give exactly I + N * C for
#     every counter, and N + 1 connections.
#
# Why connections are byte-identical (verified by the 3 + 3 runs): the TLS
# 1.3 handshake has fixed sizes here (X25519 key shares, the same RSA-2048
# certificate and signature length, no SNI for an IP address), OpenSSL adds
# no random record padding by default, and PostgreSQL disables session
# tickets and the session cache, so there is no NewSessionTicket and no
# resumption; the startup packet, the server's ParameterStatus messages
# and BackendKeyData have the same length every time.  Measured on x86-64,
# PostgreSQL 15.20, OpenSSL 3.0: C = 2993 bytes sent / 745 received,
# 10 / 8 records; I = 2905 / 708, 9 / 7.
#
# Environment: SSLR_CHURN_CONNECTIONS (default 2000; bench/reliability.sh
# runs 20000).  Run as the server's OS user, see test/t/000_harness.pl.

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SslrTest;

my $N = $ENV{SSLR_CHURN_CONNECTIONS} // 2000;
die "SSLR_CHURN_CONNECTIONS must be an even number >= 2 (got '$N')"
  unless $N =~ /^\d+$/ && $N >= 2 && $N % 2 == 0;

# Counters of ssl_renegotiate_totals that are sums over connections (all
# but the float rekey_time and stats_reset).
my @FIELDS = qw(connections bytes_sent bytes_received records_sent
  records_received rekeys_sent rekeys_received rekey_failures
  rekeys_skipped renegotiations_refused terminations);

# log_statement = none: 20,000 "statement: SELECT 1" lines are of no use.
# log_connections = on: the log then says, for every connection, which TLS
# version it used ("SSL enabled (protocol=TLSv1.3, ...").
my $node = new_tls_node('churn', conf => <<'EOC');
log_statement = none
log_connections = on
max_connections = 20
EOC
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

my $script = PostgreSQL::Test::Utils::tempdir('churn') . '/select1.sql';
open my $fh, '>', $script or die "$script: $!";
print $fh "SELECT 1;\n";
close $fh;

# pgbench over TLS 1.3 on 127.0.0.1, configured only through libpq's
# environment variables (checked below: every connection shows up in the
# log as TLSv1.3, and in the totals, which count TLS connections only).
my %PGBENCH_ENV = (
	PGHOST => '127.0.0.1',
	PGPORT => $node->port,
	PGDATABASE => 'postgres',
	PGSSLMODE => 'require',
	PGSSLMINPROTOCOLVERSION => 'TLSv1.3',
	PGSSLMAXPROTOCOLVERSION => 'TLSv1.3',
	PGGSSENCMODE => 'disable',
	PGAPPNAME => undef,
	PGOPTIONS => undef,
	PGUSER => undef,
	PGSERVICE => undef,
	PGHOSTADDR => undef,
	PGSSLCERT => undef,
	PGSSLKEY => undef,
	PGSSLCOMPRESSION => undef,);

sub pgbench
{
	my ($clients, $tx) = @_;
	local %ENV = %ENV;
	for my $k (keys %PGBENCH_ENV)
	{
		if   (defined $PGBENCH_ENV{$k}) { $ENV{$k} = $PGBENCH_ENV{$k} }
		else                            { delete $ENV{$k} }
	}
	my @cmd = (
		'pgbench', '-n', '-C', '-c', $clients, '-j',
		$clients, '-t', $tx, '-f', $script);
	my ($out, $err) = ('', '');
	my $t0 = time;
	my $ok = IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err);
	my $secs = time - $t0;
	my $total = $clients * $tx;
	ok($ok, "pgbench -C -c $clients -t $tx exits with 0")
	  or diag("stdout:\n$out\nstderr:\n$err");
	like(
		$out,
		qr/number of transactions actually processed: $total\/$total\b/,
		"pgbench -C -c $clients -t $tx: all $total transactions processed"
	) or diag("stdout:\n$out\nstderr:\n$err");
	return ($out, $err, $secs);
}

# No client backend but ours: every pgbench backend has exited (and so
# has detached its slot: that happens in before_shmem_exit, before it
# leaves pg_stat_activity).
sub wait_other_clients_gone
{
	my ($what) = @_;
	ok( $node->poll_query_until(
			'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
			 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()}
		),
		"$what: every other client backend has exited");
}

sub tally
{
	my ($row) = @_;
	return { map { $_ => $row->{$_} } @FIELDS };
}

sub tally_str
{
	my ($t) = @_;
	return join(' ', map { "$_=$t->{$_}" } @FIELDS);
}

sub measure
{
	my ($clients, $tx) = @_;
	wait_other_clients_gone("before pgbench -c $clients -t $tx");
	$node->safe_psql('postgres', 'SELECT ssl_renegotiate_reset()');
	my $zero = tally(totals_row($node));
	is_deeply(
		$zero,
		{ map { $_ => 0 } @FIELDS },
		'totals are zero after ssl_renegotiate_reset()');
	my (undef, undef, $secs) = pgbench($clients, $tx);
	wait_other_clients_gone("after pgbench -c $clients -t $tx");
	return (tally(totals_row($node)), $secs);
}

# ------------------------------------------------------------ calibration
my (@t1, @t2);
for my $i (1 .. 3)
{
	push @t1, (measure(1, 1))[0];
	push @t2, (measure(1, 2))[0];
}
note "run $_ of pgbench -C -c 1 -t 1: " . tally_str($t1[ $_ - 1 ]) for 1 .. 3;
note "run $_ of pgbench -C -c 1 -t 2: " . tally_str($t2[ $_ - 1 ]) for 1 .. 3;

is($t1[0]{connections}, 2,
	'-t 1 makes 2 connections: pgbench\'s setup connection and one for the transaction'
);
is($t2[0]{connections}, 3, '-t 2 makes 3 connections');
is_deeply($t1[$_], $t1[0],
	"pgbench -C -t 1: run " . ($_ + 1) . " identical to run 1")
  for 1 .. 2;
is_deeply($t2[$_], $t2[0],
	"pgbench -C -t 2: run " . ($_ + 1) . " identical to run 1")
  for 1 .. 2;

my %C =
  map { $_ => $t2[0]{$_} - $t1[0]{$_} } @FIELDS;  # one transaction connection
my %I = map { $_ => $t1[0]{$_} - $C{$_} } @FIELDS;    # the setup connection
note 'one transaction connection (C): ' . tally_str(\%C);
note 'pgbench\'s setup connection (I): ' . tally_str(\%I);
is($C{connections}, 1, 'C is one connection');
is($I{connections}, 1, 'I is one connection');

# C does what I does plus one query: one TLS 1.3 record each way.  With
# TLS 1.3's AEAD ciphers a record is 5 (header) + plaintext + 1 (inner
# content type) + 16 (tag) bytes on the wire.
#   client: Query: 'Q', int32 length, "SELECT 1;\0"
#           (pgbench sends the script's line as it is)       = 15 bytes
#   server: RowDescription: 'T', int32 length, int16 count,
#           "?column?\0", int32 table, int16 attnum,
#           int32 type, int16 typlen, int32 typmod, int16 fmt = 34 bytes
#           DataRow: 'D', int32, int16, int32 length, "1"    = 12 bytes
#           CommandComplete: 'C', int32, "SELECT 1\0"        = 14 bytes
#           ReadyForQuery: 'Z', int32, 'I'                   =  6 bytes
#           (sent with one flush: one record)                = 66 bytes
is($C{records_received} - $I{records_received},
	1, 'C - I: one more record received (the Query)');
is($C{records_sent} - $I{records_sent},
	1, 'C - I: one more record sent (the answer)');
is( $C{bytes_received} - $I{bytes_received},
	5 + 15 + 1 + 16,
	'C - I: bytes received = one TLS 1.3 record of 15 bytes');
is( $C{bytes_sent} - $I{bytes_sent},
	5 + 66 + 1 + 16,
	'C - I: bytes sent = one TLS 1.3 record of 66 bytes');
is($C{$_}, 0, "C: $_ = 0 (default limit, no rotation in a handshake)")
  for qw(rekeys_sent rekeys_received rekey_failures rekeys_skipped
  renegotiations_refused terminations);

# ------------------------------------------------------------------ churn
wait_other_clients_gone('before the churn');
my $log_offset = -s $node->logfile;
my ($totals, $secs) = measure(2, $N / 2);
my $log = slurp_file($node->logfile, $log_offset);

my %expect = map { $_ => $I{$_} + $N * $C{$_} } @FIELDS;
note
  sprintf(
	'churn: %d transactions, %d TLS connections in %.1f s (%.0f connections/s)',
	$N, $N + 1, $secs, ($N + 1) / ($secs || 1));
note 'churn totals:   ' . tally_str($totals);
note 'expected I+N*C: ' . tally_str(\%expect);
is($totals->{connections},
	$N + 1, "totals.connections == N + 1 == " . ($N + 1));

for my $f (grep { $_ ne 'connections' } @FIELDS)
{
	is($totals->{$f}, $expect{$f}, "totals.$f == I + N * C == $expect{$f}");
}

# every connection of the churn was TLS 1.3 (libpq's environment honoured)
my @tls_lines =
  $log =~ /(connection authorized: .*SSL enabled \(protocol=[^,]*,)/g;
is(scalar(@tls_lines), $N + 1,
	'the log shows N + 1 connections authorized over TLS during the churn');
is( scalar(grep { !/protocol=TLSv1\.3,/ } @tls_lines),
	0,
	'... every one of them TLSv1.3 (libpq\'s environment variables honoured)'
);

# ------------------------------------------------------------- log clean
my @bad = grep { /\b(ERROR|FATAL|PANIC|WARNING):/ || /terminated by signal/ }
  split /\n/, $log;
is(scalar(@bad), 0,
	'no ERROR/FATAL/PANIC/WARNING or crash in the log during the churn')
  or diag(join("\n", @bad[ 0 .. ($#bad < 19 ? $#bad : 19) ]));

# ---------------------------------------------------------- no slot leak
is( $node->safe_psql(
		'postgres', 'SELECT count(*) FROM ssl_renegotiate_activity'),
	'0',
	'no TLS session alive: ssl_renegotiate_activity has no rows');
my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $pid = $s->query_safe('SELECT pg_backend_pid()');
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) || \'/\' || count(*) FILTER (WHERE pid = '
		  . $pid
		  . ') FROM ssl_renegotiate_activity'),
	'1/1',
	'one TLS session open: exactly one row, for its pid');
ok(wait_idle($node, $pid), 'new session idle');
my ($krcv, $ksent) = kernel_tls_counts($node, $pid);
my $row = activity_row($node, $pid);
is_deeply(
	[ $row->{bytes_received}, $row->{bytes_sent} ],
	[ $krcv, $ksent ],
	'its counts equal the kernel\'s (slot reused after the churn starts clean)'
);
is( $node->safe_psql(
		'postgres', 'SELECT connections FROM ssl_renegotiate_totals'),
	$N + 2,
	'totals: the new session is the N + 2nd connection since the reset');
$s->quit;

$node->stop;
done_testing();
