
# Copyright (c) 2026, ssl_renegotiate developers
#
# Key rotation behind a connection pooler: Debian's pgbouncer in front of
# the server (server_tls_sslmode = require), in session and in transaction
# pooling, with ssl_renegotiate.byte_limit = 64kB and the server's
# ssl_renegotiate.tls12 = renegotiate.  pgbouncer's server connections are
# the long-lived ones that need rotation.  Each pool has one server
# connection (default_pool_size = 1), so every client of a pool goes over
# it; pgbouncer's admin console (SHOW SERVERS: remote_pid, local_port)
# names its backend, checked against pg_stat_activity.client_port.
#
# Through each pool, one after the other: a COPY TO and a COPY FROM of
# 4.3 MB with psql, then pgbench -t with a script that sends and receives
# 16 kB per transaction; the data checked by checksums, the rotations on
# the server connection's ssl_renegotiate_activity row and in the totals
# (only pgbouncer talks TLS to this server: the test's own queries use the
# Unix socket).  Three roles:
#
#   regress_renegotiated  the server's default, tls12 = renegotiate
#   regress_terminated    ALTER ROLE ... SET ssl_renegotiate.tls12 = 'terminate'
#   regress_pooler        no setting of its own at first; on TLS 1.2 it is
#                         exempted as the FATAL's hint says (the recipe):
#                         ALTER ROLE regress_pooler SET ssl_renegotiate.tls12 = 'warn'
#
# TLS 1.3 (server_tls_protocols = tlsv1.3), every role: the one pooled
# connection carries everything, intact, the server's key rotated at each
# 64 kB (KeyUpdate), pgbouncer's key rotated on request.
# TLS 1.2 (server_tls_protocols = tlsv1.2): pgbouncer does not renegotiate
# (its OpenSSL answers the server's HelloRequest, but pgbouncer drops the
# server connection when the handshake shows in its own reads or writes:
# "unexpected handshake, closing connection"), so
#   renegotiate  each transfer breaks at the first 64 kB or one of the next
#                few (a COPY FROM may have sent some MB more: pgbouncer sees
#                the request only when it next reads from the server): the
#                client gets an error from pgbouncer, what it did get is a
#                prefix of the data, nothing of the COPY FROM is committed,
#                pgbench's transactions counted as done are stored; each
#                server connection's renegotiation failed, or completed
#                (when pgbouncer did not touch the connection meanwhile)
#                before the connection was dropped; the server logs for each
#                failed renegotiation a FATAL whose hint names the role and
#                the ALTER ROLE exemption;
#   terminate    the server ends the connection at the limit; on the send
#                side its FATAL reaches the client through pgbouncer;
#   warn         (regress_pooler, exempted) everything works over one server
#                connection, nothing rotated, the skip counted once
#                (rekeys_skipped = 1) and logged once, while the two other
#                roles on the same server are still renegotiated or ended.
#
# Nothing here asserts on time.  Skipped when pgbouncer is not installed
# (Debian: pgbouncer; scripts/setup.sh keeps the packaged daemon stopped).

use strict;
use warnings FATAL => 'all';

use Digest::MD5    qw(md5_hex);
use File::Basename qw(basename);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $PGBOUNCER = $ENV{SSLR_PGBOUNCER} // '/usr/sbin/pgbouncer';
plan skip_all =>
  "pgbouncer is not installed: no $PGBOUNCER (Debian: pgbouncer)"
  unless -x $PGBOUNCER;

my $LIMIT = 64 * 1024;
my $ROWS = 40_000;             # COPY text of 4.3 MB
my $FILLER = 70;
my $BENCH_TX = 40;             # transactions per pgbench client
my $PAYLOAD_BYTES = 16_000;    # each way, per transaction
# one pgbench client holds its server connection in session pooling; in
# transaction pooling two share one
my %BENCH_CLIENTS = (session => 1, transaction => 2);

my @ROLES = qw(regress_renegotiated regress_terminated regress_pooler);
# the server's LOG at exit for a connection lost with our renegotiation in
# flight, when PostgreSQL's own write saw the loss first
# The start of a server log line up to the pid: "%m [%p]", or, in
# PostgreSQL 19's test harness, "%m %b[%p]" ("... UTC client backend[123]")
my $log_prefix = qr/\S+ \S+ \S+ (?:[a-z][a-z ]*)?\[(\d+)\]/;
my $lost_in_renegotiation =
  qr/ssl_renegotiate: connection of pid \d+ lost during a TLS renegotiation/;

my $tmp = PostgreSQL::Test::Utils::tempdir;

my $node = new_tls_node(
	'bouncer',
	conf => "ssl_renegotiate.byte_limit = '64kB'\n"
	  . "ssl_renegotiate.tls12 = renegotiate\n"
	  # not the 16 kB pgbench statements
	  . "log_statement = ddl\n"
	  # the pid of each server connection pgbouncer opens
	  . "log_connections = on\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION ssl_renegotiate;
CREATE TABLE bouncer_in (i int, s text);
CREATE TABLE bouncer_bench (client int, payload text);
GRANT ALL ON bouncer_in, bouncer_bench TO PUBLIC;
CREATE ROLE regress_renegotiated LOGIN;
CREATE ROLE regress_terminated LOGIN;
CREATE ROLE regress_pooler LOGIN;
ALTER ROLE regress_terminated SET ssl_renegotiate.tls12 = 'terminate';
-- a completed renegotiation leaves no other trace once its backend is gone
ALTER ROLE regress_renegotiated SET ssl_renegotiate.log_rekeys = on;
});

# What COPY TO must deliver, and what COPY FROM sends: the same rows.
my $copy_query =
  "SELECT i, md5(i::text) || repeat('x', $FILLER) FROM generate_series(1, $ROWS) i";
my $copy_md5 = series_copy_md5($node, $ROWS, $FILLER);
my $copy_file = "$tmp/series.copy";
$node->safe_psql('postgres', "\\copy ($copy_query) TO '$copy_file'");
is(file_md5($copy_file), $copy_md5, 'reference COPY file written');
my $copy_data = slurp_file($copy_file);
# How much one server key may carry: during the COPY TO, whose largest
# message is a CopyData row, and in all (pgbench's 16 kB DataRow).
my $copy_send_bound =
  send_key_bound($LIMIT, 5 + length("$ROWS\t") + 32 + $FILLER + 1);
my $send_bound = send_key_bound($LIMIT, 5 + 2 + 4 + $PAYLOAD_BYTES);

# The pgbench script: 16 kB up (a literal) and 16 kB down per transaction.
my $payload = join '',
  map { chr(ord('a') + $_ % 26) } 0 .. $PAYLOAD_BYTES - 1;
my $bench_script = "$tmp/bench.sql";
PostgreSQL::Test::Utils::append_to_file($bench_script,
		"INSERT INTO bouncer_bench VALUES (:client_id, '$payload');\n"
	  . "SELECT repeat(md5(:client_id::text), "
	  . ($PAYLOAD_BYTES / 32)
	  . ");\n");

# ---------------------------------------------------------------------
# pgbouncer
# ---------------------------------------------------------------------

# pgbouncers running, stopped at exit should the test die before it stops
# them
my %pgbouncers;
END { $_->kill_kill for values %pgbouncers; }

# Starts pgbouncer (in the foreground, as this test's user) on a free
# loopback port, with databases "session" and "transaction" (the pool
# modes) on the test server; returns a hashref: port, log, handle.
sub start_pgbouncer
{
	my ($name, $protocol) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $dir = "$tmp/$name";
	mkdir $dir or die "mkdir $dir: $!";
	# auth_type = trust still wants each user listed
	my $users = "$dir/userlist.txt";
	PostgreSQL::Test::Utils::append_to_file($users,
		join('', map { qq{"$_" ""\n} } 'postgres', @ROLES));
	my $server = 'host=127.0.0.1 port=' . $node->port . ' dbname=postgres';
	my $ini = "$dir/pgbouncer.ini";
	# next to the server's log, kept (and shown by scripts/test.sh) when
	# the test fails
	(my $log = basename($0)) =~ s/\.pl$//;
	$log = "$PostgreSQL::Test::Utils::log_path/${log}_pgbouncer_$name.log";
	PostgreSQL::Test::Utils::append_to_file($ini, <<"EOINI");
[databases]
session = $server pool_mode=session
transaction = $server pool_mode=transaction

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $users
admin_users = postgres
logfile = $log
default_pool_size = 1
server_tls_sslmode = require
server_tls_protocols = $protocol
EOINI
	# its output goes to a file: a pipe nobody reads would fill and stop it
	my $h = IPC::Run::start([ $PGBOUNCER, $ini ],
		'<', \undef, '>', "$dir/stdout", '2>&1');
	$pgbouncers{$port} = $h;
	my $b = { port => $port, log => $log, handle => $h };
	for (my $try = 0; $try < 300; $try++)
	{
		return $b
		  if (bouncer_psql($b, 'pgbouncer', 'postgres', 'SHOW VERSION'))[0];
		die "pgbouncer $name exited: " . slurp_file("$dir/stdout")
		  unless $h->pumpable;
		usleep(100_000);
	}
	die "pgbouncer $name did not come up: " . slurp_file("$dir/stdout");
}

# Stops pgbouncer at once (SIGTERM) and waits until its server
# connections are gone.
sub stop_pgbouncer
{
	my ($b) = @_;
	$b->{handle}->signal('TERM');
	$b->{handle}->finish;
	delete $pgbouncers{ $b->{port} };
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE client_addr IS NOT NULL"
	) or die 'server connections of pgbouncer remain';
	return;
}

# PostgreSQL 19beta's libpq asks for protocol 3.9999 unless told otherwise
# ("grease", to be reverted before 19rc1); pgbouncer 1.18 refuses it as a
# bad packet header.
my $grease_off =
  ($node->config_data('--version') =~ /PostgreSQL (\d+)/ && $1 >= 19)
  ? ' max_protocol_version=3.0'
  : '';

# The connection string of a client of pgbouncer (plain TCP on loopback).
sub bouncer_connstr
{
	my ($b, $db, $user, $app) = @_;
	return
		"host=127.0.0.1 port=$b->{port} dbname=$db user=$user"
	  . ' sslmode=disable gssencmode=disable application_name='
	  . ($app // 'psql')
	  . $grease_off;
}

# psql through pgbouncer: returns (ok, stdout, stderr).
sub bouncer_psql
{
	my ($b, $db, $user, $sql, $app) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			'psql', '-XAq', '-P', 'footer=off', '-v', 'ON_ERROR_STOP=1',
			'-d', bouncer_connstr($b, $db, $user, $app),
			'-c', $sql
		],
		'<',
		\undef,
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	chomp $out;
	return ($ok, $out, $err);
}

# pgbench through pgbouncer: returns (ok, stdout, stderr).
sub bouncer_pgbench
{
	my ($b, $db, $user, $clients) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			'pgbench', '-n', '-c', $clients, '-t', $BENCH_TX,
			'-f', $bench_script, bouncer_connstr($b, $db, $user, 'pgbench')
		],
		'<',
		\undef,
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return ($ok, $out, $err);
}

# pgbouncer's server connections of pool $db/$user (SHOW SERVERS rows as
# hashrefs).
sub pool_servers
{
	my ($b, $db, $user) = @_;
	my ($ok, $out, $err) =
	  bouncer_psql($b, 'pgbouncer', 'postgres', 'SHOW SERVERS');
	die "SHOW SERVERS: $err" unless $ok;
	my ($head, @lines) = split /\n/, $out;
	my @cols = split /\|/, $head;
	my @rows;
	for my $line (@lines)
	{
		my %r;
		@r{@cols} = split /\|/, $line, -1;
		push @rows, \%r if $r{user} eq $user && $r{database} eq $db;
	}
	return @rows;
}

# The backend of the one server connection of pool $db/$user: its pid,
# once pgbouncer and the server agree on it and it is idle.
sub pool_backend
{
	my ($b, $db, $user, $label) = @_;
	my @s = pool_servers($b, $db, $user);
	is(scalar(@s), 1, "$label: one server connection in the pool");
	return undef unless @s == 1;
	my $pid = $s[0]{remote_pid};
	is( $node->safe_psql(
			'postgres', "SELECT usename || ' ' || client_port
			  FROM pg_stat_activity WHERE pid = $pid"),
		"$user $s[0]{local_port}",
		"$label: SHOW SERVERS' remote_pid is the server's backend of that user and port"
	);
	ok(wait_idle($node, $pid), "$label: server connection idle");
	return $pid;
}

sub totals_delta
{
	my ($t0, $t1) = @_;
	return {
		map { $_ => $t1->{$_} - $t0->{$_} }
		  qw(connections bytes_sent bytes_received rekeys_sent rekeys_received
		  rekey_failures rekeys_skipped terminations)
	};
}

sub summary
{
	my ($h, @keys) = @_;
	return join ', ', map { "$_=" . ($h->{$_} // 'NULL') } @keys;
}

# Checks what the pgbench run stored: returns the number of rows, each
# with the whole payload (a row with another payload fails the test).
sub bench_rows
{
	my ($label) = @_;
	my ($rows, $intact) = split /\|/,
	  $node->safe_psql('postgres',
			"SELECT count(*), count(*) FILTER (WHERE md5(payload) = '"
		  . md5_hex($payload)
		  . "') FROM bouncer_bench");
	is($intact, $rows,
		"$label: every stored pgbench row carries the whole payload");
	return $rows;
}

# The pool's one server connection, once idle, and its activity row;
# none if pgbouncer has no (single) server connection in the pool.
sub pool_snapshot
{
	my ($b, $db, $user) = @_;
	my @s = pool_servers($b, $db, $user);
	return undef unless @s == 1;
	wait_idle($node, $s[0]{remote_pid});
	return activity_row($node, $s[0]{remote_pid});
}

# One pass through a pool: COPY TO, COPY FROM, pgbench.  Returns what the
# clients got, with the activity row of the pool's server connection
# after each step (while there is one).
sub run_pool
{
	my ($b, $db, $user) = @_;
	my %r = (db => $db, user => $user);
	$node->safe_psql('postgres', 'TRUNCATE bouncer_in, bouncer_bench');
	$r{log_pos} = -s $node->logfile;
	$r{bouncer_pos} = -s $b->{log};
	$r{totals0} = totals_row($node);

	$r{out_file} = "$tmp/out_$db.$user.$b->{port}";
	@r{qw(to_ok to_out to_err)} = bouncer_psql($b, $db, $user,
		"\\copy ($copy_query) TO '$r{out_file}'", 'copy_to');
	$r{row_to} = pool_snapshot($b, $db, $user);
	@r{qw(from_ok from_out from_err)} = bouncer_psql($b, $db, $user,
		"\\copy bouncer_in FROM '$copy_file'", 'copy_from');
	$r{row_from} = pool_snapshot($b, $db, $user);
	@r{qw(bench_ok bench_out bench_err)} =
	  bouncer_pgbench($b, $db, $user, $BENCH_CLIENTS{$db});
	($r{bench_done}) =
	  $r{bench_out} =~ /number of transactions actually processed: (\d+)\//;
	$r{bench_done} //= 0;

	note "client error, COPY TO: $r{to_err}" if $r{to_err} ne '';
	note "client error, COPY FROM: $r{from_err}" if $r{from_err} ne '';
	note "pgbench: $r{bench_err}" if $r{bench_err} ne '';
	return \%r;
}

# The logs of server and pgbouncer since run_pool started, and the totals'
# growth.
sub pool_logs
{
	my ($b, $r) = @_;
	$r->{server_log} = slurp_file($node->logfile, $r->{log_pos});
	$r->{bouncer_log} = slurp_file($b->{log}, $r->{bouncer_pos});
	$r->{totals} = totals_delta($r->{totals0}, totals_row($node));
	return $r->{totals};
}

# Rotations of a row between two snapshots.
sub rotations
{
	my ($from, $to) = @_;
	return sprintf(
		'%d sent, %d received',
		$to->{rekeys_sent} -     ($from ? $from->{rekeys_sent}     : 0),
		$to->{rekeys_received} - ($from ? $from->{rekeys_received} : 0));
}

# A pool that works: everything over one server connection, data intact.
# Returns the server connection's activity row at the end.
sub check_pool_works
{
	my ($b, $label, $r) = @_;
	my ($db, $user) = @$r{qw(db user)};
	my $clients = $BENCH_CLIENTS{$db};

	ok($r->{to_ok}, "$label: COPY TO succeeds");
	is(file_md5($r->{out_file}),
		$copy_md5, "$label: COPY TO data intact (md5)");
	ok($r->{from_ok}, "$label: COPY FROM succeeds");
	is( table_copy_md5($node, 'bouncer_in'),
		"$ROWS " . file_md5($copy_file),
		"$label: COPY FROM data intact (rows, md5)");
	ok($r->{bench_ok}, "$label: pgbench succeeds");
	is( $r->{bench_done},
		$clients * $BENCH_TX,
		"$label: pgbench processed all $clients x $BENCH_TX transactions");
	is( bench_rows($label),
		$clients * $BENCH_TX,
		"$label: one stored row per pgbench transaction");

	my $pid = pool_backend($b, $db, $user, $label);
	is( join(' ', map { $_ ? $_->{pid} : 'none' } @$r{qw(row_to row_from)}),
		"$pid $pid",
		"$label: COPY TO, COPY FROM and pgbench went over one server connection"
	);
	my $row = activity_row($node, $pid);
	my $d = pool_logs($b, $r);
	note "$label: server connection $pid: " . summary(
		$row, qw(version cipher bytes_sent bytes_received rekeys_sent
		  rekeys_received rekey_failures rekeys_skipped max_sent_per_key
		  max_received_per_key));
	note "$label: rotations in COPY TO: "
	  . rotations(undef, $r->{row_to})
	  . '; in COPY FROM: '
	  . rotations($r->{row_to}, $r->{row_from})
	  . '; in pgbench: '
	  . rotations($r->{row_from}, $row);
	note "$label: totals grew by " . summary($d, sort keys %$d);
	is($d->{connections}, 1,
		"$label: one TLS connection to the server in all");
	unlike($r->{server_log}, qr/FATAL/, "$label: no FATAL in the server log");
	return $row;
}

# A pool whose server connection ends at the limit, every time: each
# client gets an error, no data corrupted nor silently lost.  Returns the
# totals' growth and the server log's FATAL entries (pid => text).
sub check_pool_breaks
{
	my ($b, $label, $r) = @_;
	my ($db, $user) = @$r{qw(db user)};
	my $clients = $BENCH_CLIENTS{$db};

	ok(!$r->{to_ok}, "$label: COPY TO fails");
	my $got = -e $r->{out_file} ? slurp_file($r->{out_file}) : '';
	note "$label: COPY TO delivered "
	  . length($got) . ' of '
	  . length($copy_data)
	  . ' bytes';
	ok( length($got) < length($copy_data)
		  && substr($copy_data, 0, length($got)) eq $got,
		"$label: what COPY TO delivered is a prefix of the data");
	ok(!$r->{from_ok}, "$label: COPY FROM fails");
	like(
		$r->{from_err},
		qr/server closed the connection unexpectedly/,
		"$label: COPY FROM: the client sees its connection closed");
	ok(!$r->{bench_ok}, "$label: pgbench fails");
	like(
		$r->{bench_err},
		qr/client \d+ script \d+ aborted/,
		"$label: pgbench clients aborted");
	cmp_ok(
		$r->{bench_done}, '<',
		$clients * $BENCH_TX,
		"$label: pgbench did not finish its transactions");

	# A backend may still be reading what pgbouncer had sent before it
	# closed the connection (several MB of a COPY FROM); its FATAL comes
	# when it reaches the end.
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE usename = '$user'"
		),
		"$label: every server connection of the role has ended");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM bouncer_in'),
		0, "$label: nothing of the COPY FROM committed");
	cmp_ok(bench_rows($label), '>=', $r->{bench_done},
		"$label: every transaction pgbench counted as done is stored");

	my $d = pool_logs($b, $r);
	note "$label: totals grew by " . summary($d, sort keys %$d);
	# one server connection for the COPY TO, one for the COPY FROM, one or
	# more for pgbench: pgbouncer connects again for the client next in line
	cmp_ok($d->{connections}, '>=', 3,
		"$label: a new server connection after each break");
	# each connection's last word: a FATAL, or, where one of PostgreSQL's
	# own writes met the closed connection first, our LOG at exit
	my %fatal = map { $_->{pid} => $_->{text} }
	  grep {
		$_->{level} eq 'FATAL' || $_->{text} =~ /^$lost_in_renegotiation/
	  } log_entries($r->{server_log});
	return ($d, \%fatal);
}

# The server log's entries (line_prefix '%m [%p] %q%a '): pid, level and
# text, with the DETAIL and HINT lines that follow.
sub log_entries
{
	my ($log) = @_;
	my (@entries, %last);
	for my $line (split /\n/, $log)
	{
		next unless $line =~ /^$log_prefix .*?([A-Z]+):  (.*)$/;
		my ($pid, $level, $text) = ($1, $2, $3);
		if ($level eq 'DETAIL' || $level eq 'HINT')
		{
			$last{$pid}{text} .= "\n$level:  $text" if $last{$pid};
			next;
		}
		push @entries, { pid => $pid, level => $level, text => $text };
		$last{$pid} = $entries[-1];
	}
	return @entries;
}

sub log_lines
{
	my ($log, $re) = @_;
	return scalar(() = $log =~ /$re/g);
}

# ---------------------------------------------------------------------
# TLS 1.3: every role, KeyUpdate both ways over the pooled connection
# ---------------------------------------------------------------------
{
	my $b = start_pgbouncer('tls13', 'tlsv1.3');
	for my $db ('session', 'transaction')
	{
		for my $user (@ROLES)
		{
			my $label = "TLS 1.3 $db pool, $user";
			my $r = run_pool($b, $db, $user);
			my $row = check_pool_works($b, $label, $r);
			is($row->{version}, 'TLSv1.3',
				"$label: server connection on TLS 1.3");
			my $to = $r->{row_to};
			cmp_ok($to->{max_sent_per_key}, '<=', $copy_send_bound,
				"$label: COPY TO: no server key carried more than $copy_send_bound bytes"
			);
			my $min_rotations = int($to->{bytes_sent} / $copy_send_bound) - 1;
			cmp_ok($to->{rekeys_sent}, '>=', $min_rotations,
				"$label: COPY TO: so at least $min_rotations rotations of the server's key"
			);
			cmp_ok($row->{max_sent_per_key}, '<=', $send_bound,
				"$label: no server key carried more than $send_bound bytes in all"
			);
			cmp_ok(
				$row->{rekeys_received} - $r->{row_from}{rekeys_received},
				'>',
				0,
				"$label: pgbench: pgbouncer's key rotated on request");
			is($row->{rekey_failures}, 0, "$label: no failed rotation");
		}
	}
	stop_pgbouncer($b);
}

# ---------------------------------------------------------------------
# TLS 1.2: pgbouncer does not renegotiate
# ---------------------------------------------------------------------
{
	my $b = start_pgbouncer('tls12', 'tlsv1.2');

	# The pooler before the exemption: renegotiated like everyone, broken;
	# the FATAL says what to do, and we do it.
	{
		my $label = 'TLS 1.2 session pool, regress_pooler not exempted';
		my $log = -s $node->logfile;
		my ($ok, $out, $err) = bouncer_psql($b, 'session', 'regress_pooler',
			"\\copy ($copy_query) TO '/dev/null'", 'copy_to');
		ok(!$ok, "$label: COPY TO fails");
		# pgbouncer closed the connection; the server says why once it sees
		# it: in its handshake (a FATAL), or, where one of PostgreSQL's own
		# writes saw it first ("connection to client lost"), at exit (a LOG)
		$node->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM pg_stat_activity WHERE usename = 'regress_pooler'"
		) or die 'the server connection of regress_pooler remains';
		my $server_log = slurp_file($node->logfile, $log);
		like(
			$server_log,
			qr/(?:FATAL:  TLS renegotiation failed: |LOG:  $lost_in_renegotiation).*\n.*DETAIL:  The client \(user "regress_pooler", application "copy_to"\).*\n.*HINT:  If this client cannot renegotiate, exempt its role with (ALTER ROLE regress_pooler SET ssl_renegotiate\.tls12 = 'warn'), or have it use TLS 1\.3\./,
			"$label: the server's FATAL names the pooler's role and application and hints at the exemption"
		);
		my ($exemption) =
		  $server_log =~ /exempt its role with (ALTER ROLE .*? = 'warn')/;
		$node->safe_psql('postgres',
			$exemption
			  // "ALTER ROLE regress_pooler SET ssl_renegotiate.tls12 = 'warn'"
		);
		is( $node->safe_psql(
				'postgres',
				q{SELECT setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE rolname = 'regress_pooler'}
			),
			'{ssl_renegotiate.tls12=warn}',
			"$label: the hint's ALTER ROLE runs as written");
	}

	for my $db ('session', 'transaction')
	{
		{
			my $user = 'regress_pooler';
			my $label = "TLS 1.2 $db pool, $user exempted (warn)";
			my $r = run_pool($b, $db, $user);
			my $row = check_pool_works($b, $label, $r);
			is($row->{version}, 'TLSv1.2',
				"$label: server connection on TLS 1.2");
			is( $row->{rekeys_sent} +
				  $row->{rekeys_received} +
				  $row->{rekey_failures},
				0,
				"$label: nothing rotated, nothing failed");
			is($row->{rekeys_skipped},
				1,
				"$label: the limit's skip counted once for the connection");
			cmp_ok($row->{max_sent_per_key},
				'>', length($copy_data),
				"$label: one key carried the whole COPY TO");
			is( log_lines(
					$r->{server_log},
					qr/TLS 1\.2 connection of pid $row->{pid} reached ssl_renegotiate\.byte_limit and goes on under its current keys/
				),
				1,
				"$label: the skip logged once");
		}
		{
			my $user = 'regress_renegotiated';
			my $label = "TLS 1.2 $db pool, $user";
			my $r = run_pool($b, $db, $user);
			my ($d, $fatal) = check_pool_breaks($b, $label, $r);
			like(
				$r->{to_err},
				qr/server conn crashed\?.*server closed the connection unexpectedly/s,
				"$label: COPY TO: the client gets pgbouncer's error, then a closed connection"
			);
			# pgbouncer's OpenSSL answers the HelloRequest; pgbouncer itself
			# does not expect a handshake and drops the connection when it
			# meets one.  Mostly the handshake is left unfinished (the
			# renegotiation fails); now and then OpenSSL finishes it first,
			# when pgbouncer only read from the server meanwhile: the server
			# counts a completed renegotiation, and the connection goes on
			# until pgbouncer drops it, at once or at a later one.
			is($d->{rekeys_sent}, $d->{rekeys_received},
				"$label: a renegotiation that completed counts both ways");
			my @pids = $r->{server_log} =~
			  /^$log_prefix .*?LOG:  connection authorized: user=$user /mg;
			is(scalar(@pids), $d->{connections},
				"$label: log_connections names each server connection");
			my %completed;
			$completed{$1}++
			  while $r->{server_log} =~
			  /ssl_renegotiate: rotated the sending key of pid (\d+) /g;
			my %failed = map { $_ => 1 }
			  grep {
				$fatal->{$_} =~
				  /^(?:TLS renegotiation failed: |$lost_in_renegotiation)/
			  }
			  keys %$fatal;
			is( join(' ', grep { !$failed{$_} && !$completed{$_} } @pids),
				'',
				"$label: each server connection's renegotiation failed or completed"
			);
			note "$label: $d->{rekey_failures} renegotiations failed, "
			  . "$d->{rekeys_sent} completed ("
			  . join(', ',
				map { "pid $_: $completed{$_}" } sort keys %completed)
			  . ')';
			my @failed = map { $fatal->{$_} } sort keys %failed;
			is(scalar(@failed), $d->{rekey_failures},
				"$label: a FATAL for each failed renegotiation");
			cmp_ok(scalar(@failed), '>', 0, "$label: renegotiations failed");
			is( scalar(
					grep {
						/\nHINT:  If this client cannot renegotiate, exempt its role with ALTER ROLE $user SET ssl_renegotiate\.tls12 = 'warn', or have it use TLS 1\.3\./
					} @failed),
				scalar(@failed),
				"$label: each hints at ALTER ROLE $user SET ssl_renegotiate.tls12 = 'warn'"
			);
			# "tls_sbufio_recv: unexpected handshake" on a read; on a write
			# also "tls_sbufio_send: got TLS_WANT_POLLIN"
			my $handshakes = log_lines($r->{bouncer_log},
				qr/tls_sbufio_(?:recv|send): (?:unexpected handshake, closing connection|got TLS_WANT_POLLIN)/
			);
			note "$label: pgbouncer logged $handshakes unexpected handshakes";
			cmp_ok($handshakes, '>', 0,
				"$label: pgbouncer logs the server's handshake as unexpected"
			);
		}
		{
			my $user = 'regress_terminated';
			my $label = "TLS 1.2 $db pool, $user";
			my $r = run_pool($b, $db, $user);
			my ($d, $fatal) = check_pool_breaks($b, $label, $r);
			like(
				$r->{to_err},
				qr/FATAL:  terminating connection because its TLS 1\.2 keys reached ssl_renegotiate\.byte_limit\nDETAIL:  \d+ bytes were sent under one key; ssl_renegotiate\.tls12 is "terminate"\./,
				"$label: COPY TO: the server's FATAL reaches the client through pgbouncer"
			);
			is($d->{terminations}, $d->{connections},
				"$label: each server connection ended by the limit (terminations)"
			);
			is( $d->{rekey_failures} +
				  $d->{rekeys_sent} +
				  $d->{rekeys_received},
				0,
				"$label: no renegotiation attempted, nothing rotated");
			is( log_lines(
					$r->{server_log},
					qr/FATAL:  terminating connection because its TLS 1\.2 keys reached ssl_renegotiate\.byte_limit|ssl_renegotiate: terminated connection of pid \d+: its TLS 1\.2 keys reached ssl_renegotiate\.byte_limit/
				),
				$d->{connections},
				"$label: the server log says why, once per server connection"
			);
		}
	}
	stop_pgbouncer($b);
}

$node->stop;
done_testing();
