
# Copyright (c) 2026, ssl_renegotiate developers
#
# TLS 1.2 connections under ssl_renegotiate.byte_limit = 64kB, with each value of
# ssl_renegotiate.tls12:
#
#   renegotiate  libpq (psql) follows server-initiated renegotiations: COPY
#                TO and COPY FROM of 30 MB arrive intact, both directions
#                are counted as rotated, no key sends much more than the
#                limit; a client that refuses renegotiation is ended with a
#                clear FATAL and counted as a rekey failure.
#   warn         the session goes on under its keys, logged once per
#                connection, counted once as skipped.
#   terminate    the session is ended, with the FATAL sent to the client
#                when the send side reached the limit, and logged when the
#                receive side did.
#
# and, in every mode, a client-initiated renegotiation is refused by the
# server (no_renegotiation alert) and counted, also on a connection that
# went through a renegotiation of the server's own.
#
# The node is SslrTest's: ssl_ca_file is set, so the server asks for client
# certificates (SSL_VERIFY_PEER), as a server that offers certificate
# authentication does.
#
# Clients: psql for the bulk data, and "openssl s_client -starttls postgres"
# driven with raw protocol messages built here, for a TLS 1.2 client that
# refuses renegotiation (-no_renegotiation) and for one that asks for it
# (the interactive "R" command).

use strict;
use warnings FATAL => 'all';

use Digest::MD5;
use IPC::Run;
use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;
use PgWire;

my $LIMIT = 64 * 1024;

# Rows of the bulk COPYs: "i<TAB>md5(i) || 70 filler bytes<LF>", about 110
# bytes each; 300000 rows are about 32 MB.
my $BIG_ROWS = 300_000;
my $SMALL_ROWS = 50_000;    # about 5.5 MB
my $FILLER = 70;

my $node = new_tls_node('tls12',
	conf => "ssl_renegotiate.byte_limit = '64kB'\n"
	  . "ssl_renegotiate.tls12 = renegotiate\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION ssl_renegotiate;
CREATE TABLE copy_in (i int, s text);
});

my $tmp = PostgreSQL::Test::Utils::tempdir;

# ---------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------

# Change ssl_renegotiate.tls12 for new connections.
sub set_tls12
{
	my ($mode) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET ssl_renegotiate.tls12 = '$mode'; SELECT pg_reload_conf();"
	);
	$node->poll_query_until('postgres',
		"SELECT current_setting('ssl_renegotiate.tls12') = '$mode'")
	  or die "ssl_renegotiate.tls12 did not become $mode";
	return;
}

# Lines of the log after $offset that tell of trouble on a TLS connection.
sub log_trouble
{
	my ($offset) = @_;
	return join "\n", grep {
		/SSL error|SSL SYSCALL|could not (?:send|receive) data|unexpected EOF|connection to client lost|refused TLS renegotiation|terminat(?:ed|ing) connection|certificate changed|FATAL|PANIC|TRAP|server process/
	} split /\n/, log_since($node, $offset);
}

sub totals { return totals_row($node); }

# The SELECT whose COPY TO output is checked: row i of $rows.
sub gen_select
{
	my ($rows) = @_;
	return
	  "SELECT i, md5(i::text) || repeat('x', $FILLER) FROM generate_series(1, $rows) i";
}

# A COPY FROM input file of $rows rows (different filler than COPY TO).
# Returns (path, md5, size).
sub make_copy_in_file
{
	my ($rows, $name) = @_;
	my $path = "$tmp/$name";
	open my $fh, '>', $path or die "open $path: $!";
	binmode $fh;
	my $md5 = Digest::MD5->new;
	my $fill = 'y' x $FILLER;
	my $buf = '';
	for my $i (1 .. $rows)
	{
		$buf .= "$i\t" . Digest::MD5::md5_hex("r$i") . "$fill\n";
		if (length($buf) > 1 << 20 || $i == $rows)
		{
			print $fh $buf;
			$md5->add($buf);
			$buf = '';
		}
	}
	close $fh or die "close $path: $!";
	return ($path, $md5->hexdigest, -s $path);
}

# ---------------------------------------------------------------------
# Raw PostgreSQL protocol over "openssl s_client -starttls postgres"
# (PgWire.pm encodes and decodes the messages)
# ---------------------------------------------------------------------

# Start s_client over TLS 1.2 with @opts, log its TLS messages to a file,
# send the StartupMessage and wait for ReadyForQuery.
my $sclient_n = 0;

sub sclient_start
{
	my (@opts) = @_;
	my $c = {
		in => '',
		out => '',
		err => '',
		msgfile => "$tmp/sclient_msg_" . ++$sclient_n,
		timer => IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default),
	};
	$c->{h} = IPC::Run::start(
		[
			'openssl', 's_client',
			'-starttls' => 'postgres',
			'-connect' => '127.0.0.1:' . $node->port,
			'-tls1_2', '-quiet', @opts,
			'-msg', '-msgfile' => $c->{msgfile}
		],
		'<',
		\$c->{in},
		'>',
		\$c->{out},
		'2>',
		\$c->{err},
		$c->{timer});
	$c->{in} .= msg_startup();
	sclient_pump_until($c, sub { count_ready($c->{out}) >= 1 });
	$c->{pid} = backend_pid($c->{out});
	return $c;
}

# Pump until $cond is true, s_client exited, or the timer ran out.
sub sclient_pump_until
{
	my ($c, $cond) = @_;
	eval {
		while (!$cond->() && $c->{h}->pumpable && !$c->{timer}->is_expired)
		{
			$c->{h}->pump;
		}
	};
	note "s_client pump: $@" if $@;
	return $cond->();
}

# Has s_client exited (the connection is over)?  Waits for it, bounded.
sub sclient_wait_exit
{
	my ($c) = @_;
	sclient_pump_until($c, sub { 0 });
	my $done = !$c->{h}->pumpable;
	if ($done)
	{
		eval { $c->{h}->finish; };
	}
	return $done;
}

sub sclient_stop
{
	my ($c) = @_;
	if ($c->{h}->pumpable)
	{
		$c->{in} .= msg_terminate();
		sclient_wait_exit($c);
	}
	$c->{h}->kill_kill if $c->{h}->pumpable;
	return;
}

sub sclient_tls_log
{
	my ($c) = @_;
	return -e $c->{msgfile} ? slurp_file($c->{msgfile}) : '';
}

# The TLS messages (handshake and alerts) of s_client's log, for notes
sub sclient_tls_summary
{
	my ($c) = @_;
	return join "\n",
	  grep { /^(<<<|>>>)/ && !/\[length 0005\]/ && !/RECORD HEADER/ }
	  split /\n/, sclient_tls_log($c);
}

# ---------------------------------------------------------------------
# Checks shared by the sections
# ---------------------------------------------------------------------

my $connstr12 = tls_connstr($node, tls => '1.2');

sub row_summary
{
	my ($row) = @_;
	return 'no row' unless $row;
	return join ', ',
	  map { "$_=" . ($row->{$_} // 'NULL') }
	  qw(version bytes_sent bytes_received rekeys_sent rekeys_received
	  rekey_failures rekeys_skipped renegotiations_refused max_sent_per_key
	  max_received_per_key sent_since_rekey received_since_rekey rekey_time
	  rekey_pending);
}

# One psql session over TLS 1.2 (a psql run of its own, so that a
# connection the server ends fails the checks rather than the script) that
# runs the COPYs of @steps, each [ 'to' | 'from', $rows ], at most one
# 'from', and then reads its own ssl_renegotiate_activity row.  Checks that
# psql succeeded and that every COPY's data arrived intact.  Returns the
# backend pid and the activity row (hashref, undef if psql failed).
sub copy_session
{
	my ($label, @steps) = @_;
	(my $slug = $label) =~ s/\W+/_/g;
	$node->safe_psql('postgres', 'TRUNCATE copy_in');

	my $script = "SELECT pg_backend_pid();\n";
	my @checks;
	my $n = 0;
	for my $step (@steps)
	{
		my ($dir, $rows) = @$step;
		$n++;
		if ($dir eq 'to')
		{
			my $file = "$tmp/out_${slug}_$n";
			unlink $file;
			$script .= "\\copy (" . gen_select($rows) . ") to '$file'\n";
			push @checks, [ $dir, $rows, $file ];
		}
		else
		{
			my ($file, $md5, $size) =
			  make_copy_in_file($rows, "in_${slug}_$n");
			$script .= "\\copy copy_in from '$file'\n";
			push @checks, [ $dir, $rows, $file, $md5, $size ];
		}
	}
	$script .=
	  "SELECT row_to_json(a) FROM ssl_renegotiate_activity a WHERE pid = pg_backend_pid();\n";

	my ($out, $err) = ('', '');
	my $ret = $node->psql(
		'postgres', $script,
		connstr => $connstr12,
		stdout => \$out,
		stderr => \$err);
	is($ret, 0, "$label: psql session over TLS 1.2 succeeded");
	is($err, '', "$label: psql printed no error");

	my @lines = split /\n/, $out;
	my $pid = @lines && $lines[0] =~ /^(\d+)$/ ? $1 : undef;
	my $row =
	  @lines > 1 && $lines[-1] =~ /^\{/
	  ? JSON::PP::decode_json($lines[-1])
	  : undef;

	for my $c (@checks)
	{
		my ($dir, $rows, $file, $md5, $size) = @$c;
		if ($dir eq 'to')
		{
			my $got = -s $file // 0;
			note "$label: COPY TO of $rows rows wrote $got bytes";
			cmp_ok(
				$got, '>=',
				$rows * 100,
				"$label: COPY TO output has its full size");
			is( -e $file ? file_md5($file) : 'no file',
				series_copy_md5($node, $rows, $FILLER),
				"$label: COPY TO data intact (md5 equal on both ends)");
			unlink $file;
		}
		else
		{
			is(table_copy_md5($node, 'copy_in'),
				"$rows $md5",
				"$label: COPY FROM data intact ($size bytes, md5 equal)");
			unlink $file;
		}
	}
	ok(defined $row, "$label: session read its activity row");
	note "$label: pid " . ($pid // '?') . ': ' . row_summary($row);
	return ($pid, $row);
}

# Client-initiated renegotiation: s_client's "R" command.  The server has
# SSL_OP_NO_RENEGOTIATION in every mode: it answers the ClientHello with a
# warning no_renegotiation alert, and the extension counts it.  An OpenSSL
# client takes that warning as fatal (it sends handshake_failure and ends
# the connection), so the connection does not survive with this client;
# should it survive, a query must still work.
#
# With $after_ours, the connection first goes through one renegotiation of
# the server's own (a result larger than the limit): the option that
# refuses the client's must be back once ours is over.
sub client_renegotiation_refused
{
	my ($mode, $after_ours) = @_;
	$mode .= ': client-initiated' . ($after_ours ? ' after ours' : '');
	my $t0 = totals();
	my $log = log_position($node);

	# -no_ign_eof: with -quiet, s_client ignores its command letters unless
	# told not to ignore EOF
	my $c = sclient_start('-no_ign_eof');
	my $pid = $c->{pid};
	ok( defined $pid,
		"$mode: s_client session is up (backend pid "
		  . ($pid // 'none') . ')');
	$pid //= 0;
	my $row = activity_row($node, $pid);
	is($row && $row->{version}, 'TLSv1.2', "$mode: session uses TLS 1.2");

	if ($after_ours)
	{
		$c->{in} .= msg_ext_query("SELECT repeat('x', 200000)");
		sclient_pump_until($c, sub { count_ready($c->{out}) >= 2 });
		my @m = pg_messages($c->{out});
		my ($data) = grep { $_->[0] eq 'D' } @m;
		is(length($data ? $data->[1] : ''),
			6 + 200000, "$mode: got the 200000-byte value");
		$row = activity_row($node, $pid);
		note "$mode: after the large result: " . row_summary($row);
		is($row && $row->{rekeys_sent},
			1, "$mode: the server renegotiated once");
		is($row && $row->{rekey_failures}, 0, "$mode: without failure");
	}
	is($row && $row->{renegotiations_refused},
		0, "$mode: nothing refused yet");

	$c->{in} .= "R\n";
	my $refusal =
	  qr/^<<< TLS 1\.2, Alert \[length 0002\], warning no_renegotiation/m;
	sclient_pump_until($c,
		sub { sclient_tls_log($c) =~ $refusal || !$c->{h}->pumpable });
	like($c->{err}, qr/RENEGOTIATING/,
		"$mode: s_client started a renegotiation");

	my $survived = !sclient_wait_exit_quick($c);
	my $tls = sclient_tls_log($c);
	like($tls, $refusal,
		"$mode: server answered the ClientHello with a no_renegotiation warning"
	);
	my @hellos =
	  $tls =~ /^<<< TLS 1\.2, Handshake \[length [0-9a-f]+\], ServerHello$/mg;
	is( scalar @hellos,
		$after_ours ? 2 : 1,
		"$mode: server sent no ServerHello for the client's renegotiation");

	if ($survived)
	{
		note "$mode: the connection survived the refusal";
		my $before = count_ready($c->{out});
		$c->{in} .= msg_ext_query('SELECT 6 * 7');
		sclient_pump_until($c, sub { count_ready($c->{out}) > $before });
		like(
			$c->{out},
			qr/D\0\0\0\x0c\0\x01\0\0\0\x0242/,
			"$mode: a query works after the refusal");
		sclient_stop($c);
	}
	else
	{
		# what happened: the client gave up (fatal handshake_failure alert)
		like(
			$tls,
			qr/^>>> TLS 1\.2, Alert \[length 0002\], fatal handshake_failure/m,
			"$mode: OpenSSL client ended the connection itself (fatal handshake_failure after the refusal)"
		);
		# the alert's name: "sslv3" in OpenSSL 1.1.1 and 3.0, "ssl/tls" in
		# 3.5 and 3.6, "tls" in 4.0
		ok( eval {
				$node->wait_for_log(
					qr/\[$pid\] .*SSL error: (?:sslv3|ssl\/tls|tls) alert handshake failure/,
					$log);
			},
			"$mode: server logged the client's alert and the session ended");
	}
	note "$mode: s_client TLS messages:\n" . sclient_tls_summary($c);
	note "$mode: s_client stderr: $c->{err}";

	# wait until the backend is gone (or idle, if it survived) so totals hold
	# its tally
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid AND state <> 'idle'"
	);
	my $t1 = totals();
	is($t1->{renegotiations_refused} - $t0->{renegotiations_refused},
		1, "$mode: totals.renegotiations_refused grew by 1");
	is( $t1->{rekeys_sent} - $t0->{rekeys_sent},
		$after_ours ? 1 : 0,
		"$mode: no rekey counted for it");
	return;
}

# s_client ends by itself after a fatal alert; wait for that (bounded) but
# not as long as the general timeout when the connection lives on.
sub sclient_wait_exit_quick
{
	my ($c) = @_;
	for (1 .. 100)
	{
		last unless $c->{h}->pumpable;
		eval { $c->{h}->pump_nb; };
		usleep(100_000);
	}
	my $done = !$c->{h}->pumpable;
	eval { $c->{h}->finish; } if $done;
	return $done;
}

# =====================================================================
# ssl_renegotiate.tls12 = renegotiate
# =====================================================================
{
	my $mode = 'renegotiate';
	set_tls12($mode);
	my $log = log_position($node);

	# COPY TO: the server sends 32 MB; its send side renegotiates, in the
	# middle of the COPY (the server drives the handshake itself)
	my ($pid, $row) =
	  copy_session("$mode: psql COPY TO", [ to => $BIG_ROWS ]);
	$row //= {};
	is($row->{version}, 'TLSv1.2', "$mode: COPY TO: session used TLS 1.2");
	cmp_ok($row->{rekeys_sent} // 0,
		'>', 0, "$mode: COPY TO: rekeys_sent > 0");
	cmp_ok($row->{rekeys_received} // 0,
		'>', 0, "$mode: COPY TO: rekeys_received > 0");
	is( $row->{rekeys_received} // 'none',
		$row->{rekeys_sent}     // 'no row',
		"$mode: COPY TO: each renegotiation counted in both directions");
	# about one renegotiation per 64 kB sent (at least one per 2 x limit)
	cmp_ok(
		$row->{rekeys_sent} // 0,
		'>=',
		int(($row->{bytes_sent} // 2 * $LIMIT) / (2 * $LIMIT)),
		"$mode: COPY TO: rekeys_sent in proportion to the bytes sent");
	is($row->{rekey_failures}, 0, "$mode: COPY TO: rekey_failures = 0");
	is($row->{rekeys_skipped}, 0, "$mode: COPY TO: rekeys_skipped = 0");

	# limit + the largest protocol message (a CopyData row) + PostgreSQL's
	# 8 kB send buffer, which may be flushed between two safe points
	my $largest_msg = 5 + length("$BIG_ROWS\t") + 32 + $FILLER + 1;
	my $bound = $LIMIT + $largest_msg + 8192;
	cmp_ok($row->{max_sent_per_key} // 9e99, '<=', $bound,
		"$mode: COPY TO: max_sent_per_key <= limit + largest message + 8 kB ($bound)"
	);
	cmp_ok($row->{max_sent_per_key} // 0,
		'>=', $LIMIT, "$mode: COPY TO: max_sent_per_key >= limit");

	# COPY FROM: the server receives 32 MB; its receive side renegotiates
	# (the HelloRequest goes out at once; libpq reads it when it reads)
	($pid, $row) =
	  copy_session("$mode: psql COPY FROM", [ from => $BIG_ROWS ]);
	$row //= {};
	cmp_ok(
		$row->{bytes_received} // 0,
		'>=',
		$BIG_ROWS * 100,
		"$mode: COPY FROM: bytes_received >= the data");
	cmp_ok($row->{rekeys_received} // 0,
		'>', 0, "$mode: COPY FROM: rekeys_received > 0");
	cmp_ok($row->{rekeys_sent} // 0,
		'>', 0, "$mode: COPY FROM: rekeys_sent > 0");
	is( $row->{rekeys_received} // 'none',
		$row->{rekeys_sent}     // 'no row',
		"$mode: COPY FROM: each renegotiation counted in both directions");
	is($row->{rekey_failures}, 0, "$mode: COPY FROM: rekey_failures = 0");
	cmp_ok($row->{max_sent_per_key} // 9e99,
		'<=', $bound, "$mode: COPY FROM: max_sent_per_key <= $bound");

	is(log_trouble($log), '',
		"$mode: no SSL error, FATAL nor renegotiation trouble logged for the psql sessions"
	);

	# A client that refuses renegotiation: the server renegotiates after the
	# first 64 kB of the result; the client answers no_renegotiation; the
	# session is ended with the FATAL and counted as a rekey failure.
	my $t0 = totals();
	$log = log_position($node);
	my $c = sclient_start('-no_renegotiation', '-nocommands');
	my $rpid = $c->{pid};
	ok(defined $rpid, "$mode: refusing client: s_client session is up");
	$rpid //= 0;
	$c->{in} .= msg_query("SELECT repeat('x', 200000)");
	my $ended = sclient_wait_exit($c);
	ok($ended, "$mode: refusing client: the connection was ended");
	my $tls = sclient_tls_log($c);
	like(
		$tls,
		qr/^<<< TLS 1\.2, Handshake \[length 0004\], HelloRequest/m,
		"$mode: refusing client: server asked it to renegotiate (HelloRequest)"
	);
	like(
		$tls,
		qr/^>>> TLS 1\.2, Alert \[length 0002\], warning no_renegotiation/m,
		"$mode: refusing client: client answered no_renegotiation");
	note "$mode: refusing client: s_client TLS messages:\n"
	  . sclient_tls_summary($c);
	my @m = pg_messages($c->{out});
	my ($data) = grep { $_->[0] eq 'D' } @m;
	note "$mode: refusing client got messages "
	  . join(' ', map { $_->[0] } @m) . ' ('
	  . length($c->{out})
	  . ' bytes)';
	is(scalar(grep { $_->[0] eq 'Z' } @m),
		1, "$mode: refusing client: no ReadyForQuery after the query");
	ok( eval {
			$node->wait_for_log(
				qr/\[$rpid\] .*FATAL:  client refused TLS renegotiation/,
				$log);
		},
		"$mode: refusing client: server logged FATAL client refused TLS renegotiation"
	);
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $rpid");
	my $t1 = totals();
	is($t1->{rekey_failures} - $t0->{rekey_failures},
		1, "$mode: refusing client: totals.rekey_failures grew by 1");
	is($t1->{rekeys_sent} - $t0->{rekeys_sent},
		0, "$mode: refusing client: no rekey counted");

	client_renegotiation_refused($mode);
	client_renegotiation_refused($mode, 1);
}

# =====================================================================
# ssl_renegotiate.tls12 = warn
# =====================================================================
{
	my $mode = 'warn';
	set_tls12($mode);
	my $log = log_position($node);

	# one session, traffic both ways, well past the limit each way
	my ($pid, $row) = copy_session(
		"$mode: psql",
		[ to => $SMALL_ROWS ],
		[ from => $SMALL_ROWS ],
		[ to => $SMALL_ROWS ]);
	$row //= {};
	$pid //= 0;
	my @hits = log_since($node, $log) =~
	  /LOG:  ssl_renegotiate: TLS 1\.2 connection of pid $pid reached ssl_renegotiate\.byte_limit and goes on under its current keys/g;
	is( scalar @hits,
		1,
		"$mode: the warning is logged exactly once for pid $pid, after traffic both ways"
	);
	is($row->{rekeys_skipped}, 1, "$mode: rekeys_skipped = 1");
	is($row->{rekeys_sent}, 0, "$mode: rekeys_sent = 0");
	is($row->{rekeys_received}, 0, "$mode: rekeys_received = 0");
	is($row->{rekey_failures}, 0, "$mode: rekey_failures = 0");
	cmp_ok(
		$row->{sent_since_rekey} // 0,
		'>',
		2 * $SMALL_ROWS * 100,
		"$mode: the connection went on sending under its first key");
	cmp_ok(
		$row->{received_since_rekey} // 0,
		'>',
		$SMALL_ROWS * 100,
		"$mode: ... and receiving under its first key");
	is(log_trouble($log), '',
		"$mode: no SSL error nor FATAL logged for the psql session");

	# A client that refuses renegotiation is never asked: full result, and
	# the session goes on.
	$log = log_position($node);
	my $c = sclient_start('-no_renegotiation', '-nocommands');
	my $rpid = $c->{pid};
	ok(defined $rpid, "$mode: refusing client: s_client session is up");
	$rpid //= 0;
	$c->{in} .= msg_query("SELECT repeat('x', 200000)");
	sclient_pump_until($c, sub { count_ready($c->{out}) >= 2 });
	my @m = pg_messages($c->{out});
	note "$mode: refusing client got messages "
	  . join(' ', map { $_->[0] } @m);
	my ($data) = grep { $_->[0] eq 'D' } @m;
	my $value = defined $data ? substr($data->[1], 6) : '';
	is(length($value), 200000,
		"$mode: refusing client: got the full 200000-byte value");
	ok($value =~ /^x+$/, "$mode: refusing client: value intact");
	ok((grep { $_->[0] eq 'C' && $_->[1] eq "SELECT 1\0" } @m),
		"$mode: refusing client: CommandComplete");

	# a second large result: the session goes on
	$c->{in} .= msg_query("SELECT length(repeat('y', 300000)::text)");
	sclient_pump_until($c, sub { count_ready($c->{out}) >= 3 });
	like(
		$c->{out},
		qr/D\0\0\0\x10\0\x01\0\0\0\x06300000/,
		"$mode: refusing client: session goes on (second query answered)");
	my $row2 = activity_row($node, $rpid);
	is($row2 && $row2->{rekeys_skipped},
		1, "$mode: refusing client: rekeys_skipped = 1");
	is($row2 && $row2->{rekeys_sent},
		0, "$mode: refusing client: rekeys_sent = 0");
	is($row2 && $row2->{rekey_failures},
		0, "$mode: refusing client: rekey_failures = 0");
	sclient_stop($c);
	# s_client writes its TLS log through a buffer: read it after exit
	my $tls = sclient_tls_log($c);
	like($tls, qr/Finished/,
		"$mode: refusing client: s_client TLS log written");
	unlike($tls, qr/HelloRequest/,
		"$mode: refusing client: no HelloRequest sent");
	ok( log_since($node, $log) =~
		  /ssl_renegotiate: TLS 1\.2 connection of pid $rpid reached/,
		"$mode: refusing client: the warning is logged for its pid");

	client_renegotiation_refused($mode);
}

# =====================================================================
# ssl_renegotiate.tls12 = terminate
# =====================================================================
{
	my $mode = 'terminate';
	set_tls12($mode);
	my $connstr = tls_connstr($node, tls => '1.2');

	# COPY TO: the send side reaches the limit: FATAL to the client
	my $t0 = totals();
	my $log = log_position($node);
	my $file = "$tmp/copy_out_terminate";
	my ($out, $err) = ('', '');
	my $ret = $node->psql(
		'postgres',
		"SELECT pg_backend_pid();\n\\copy ("
		  . gen_select($SMALL_ROWS)
		  . ") to '$file'\nSELECT 'still here';",
		connstr => $connstr,
		stdout => \$out,
		stderr => \$err);
	note "$mode: psql COPY TO: ret=$ret stdout=$out stderr=$err";
	isnt($ret, 0, "$mode: COPY TO: psql failed");
	like(
		$err,
		qr/FATAL:  terminating connection because its TLS 1\.2 keys reached ssl_renegotiate\.byte_limit/,
		"$mode: COPY TO: client got the FATAL");
	unlike($out, qr/still here/, "$mode: COPY TO: session did not go on");
	my ($tpid) = $out =~ /^(\d+)$/m;
	ok(defined $tpid, "$mode: COPY TO: backend pid known");
	cmp_ok(
		-s $file // 0,
		'<',
		$SMALL_ROWS * 100,
		"$mode: COPY TO: output was cut short");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = "
		  . ($tpid // 0));
	my $t1 = totals();
	is($t1->{terminations} - $t0->{terminations},
		1, "$mode: COPY TO: totals.terminations grew by 1");

	# COPY FROM: the receive side reaches the limit: the connection ends,
	# and the server logs why
	$node->safe_psql('postgres', 'TRUNCATE copy_in');
	my ($in_file) = make_copy_in_file($SMALL_ROWS, 'copy_in_terminate');
	$t0 = totals();
	$log = log_position($node);
	($out, $err) = ('', '');
	$ret = $node->psql(
		'postgres',
		"SELECT pg_backend_pid();\n\\copy copy_in from '$in_file'\nSELECT 'still here';",
		connstr => $connstr,
		stdout => \$out,
		stderr => \$err);
	note "$mode: psql COPY FROM: ret=$ret stdout=$out stderr=$err";
	isnt($ret, 0, "$mode: COPY FROM: psql failed");
	unlike($out, qr/still here/, "$mode: COPY FROM: session did not go on");
	($tpid) = $out =~ /^(\d+)$/m;
	ok(defined $tpid, "$mode: COPY FROM: backend pid known");
	$tpid //= 0;
	ok( eval {
			$node->wait_for_log(
				qr/LOG:  ssl_renegotiate: terminated connection of pid $tpid: its TLS 1\.2 keys reached ssl_renegotiate\.byte_limit after \d+ bytes received/,
				$log);
		},
		"$mode: COPY FROM: server logged the termination for pid $tpid");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM copy_in'),
		'0', "$mode: COPY FROM: nothing committed");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $tpid");
	$t1 = totals();
	is($t1->{terminations} - $t0->{terminations},
		1, "$mode: COPY FROM: totals.terminations grew by 1");

	# A client that refuses renegotiation: it does not matter, the session
	# ends with the FATAL of terminate, which the client receives.
	$t0 = totals();
	$log = log_position($node);
	my $c = sclient_start('-no_renegotiation', '-nocommands');
	my $rpid = $c->{pid};
	ok(defined $rpid, "$mode: refusing client: s_client session is up");
	$rpid //= 0;
	$c->{in} .= msg_query("SELECT repeat('x', 200000)");
	my $ended = sclient_wait_exit($c);
	ok($ended, "$mode: refusing client: the connection was ended");
	my @m = pg_messages($c->{out});
	note "$mode: refusing client got messages "
	  . join(' ', map { $_->[0] } @m);
	my ($e) = map { error_fields($_->[1]) } grep { $_->[0] eq 'E' } @m;
	is($e && $e->{V}, 'FATAL', "$mode: refusing client: got a FATAL");
	is( $e && $e->{M},
		'terminating connection because its TLS 1.2 keys reached ssl_renegotiate.byte_limit',
		"$mode: refusing client: ... the FATAL of terminate");
	my $tls = sclient_tls_log($c);
	like($tls, qr/Finished/,
		"$mode: refusing client: s_client TLS log written");
	unlike($tls, qr/HelloRequest/,
		"$mode: refusing client: no HelloRequest sent");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $rpid");
	$t1 = totals();
	is($t1->{terminations} - $t0->{terminations},
		1, "$mode: refusing client: totals.terminations grew by 1");
	is($t1->{rekey_failures} - $t0->{rekey_failures},
		0, "$mode: refusing client: no rekey failure counted");

	client_renegotiation_refused($mode);
}

$node->stop;
done_testing();
