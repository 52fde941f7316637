
# Copyright (c) 2026, ssl_renegotiate developers
#
# Rotation against clients on two TLS stacks other than OpenSSL and JSSE
# (issue 27): test/t/clients/gnutls_copy.c (GnuTLS 3.7.9, protocol v3 of its
# own) and test/t/clients/rustls/ (tokio-postgres over rustls 0.20, Debian's
# crates), both built here by test/t/clients/build.sh.
#
# TLS 1.3, each client, ssl_renegotiate.byte_limit = 16kB, 64kB, 1MB and
# the default (512MB): a COPY TO of about 64 MB and a COPY FROM of as much,
# each in a session of its own, then a long session of small queries at
# 16kB.  Each session is held open once its work is done: its
# ssl_renegotiate_activity row is read then, and the session must still
# answer afterwards.  Checked: data intact (the client's MD5 against the
# server's, in SQL), the session alive, the direction that should rotate
# rotated (none at the default: 64 MB is below 512MB), no rekey failure,
# and what GnuTLS counted (KeyUpdates received and sent, its handshake
# hook) equal to the server's rekeys_sent and rekeys_received.
#
# The bound on how often the server rotates: GnuTLS 3.6.8 and later end
# the connection (GNUTLS_E_TOO_MANY_HANDSHAKE_PACKETS) at the 9th KeyUpdate
# received within 1000 ms (lib/tls13/key_update.c, KEY_UPDATES_PER_WINDOW
# 8, KEY_UPDATES_WINDOW 1000), which a 16kB or 64kB limit reaches within
# milliseconds of a COPY.  ssl_renegotiate.min_rekey_gap (default 1s,
# floor 250ms) makes a due rotation wait until the last one in that
# direction is that old, so here each direction's rotations are at most
# the session's seconds / gap + 2.  The file asserts that behaviour: on a
# server without the setting the GnuTLS cells at 16kB, 64kB and 1MB fail
# (docs/clients.md has the measured table).  min_rekey_gap is put in the
# node's postgresql.conf only for the run at the floor (250ms), and taken
# out after.
#
# TLS 1.2 with ssl_renegotiate.tls12 = renegotiate at 64kB: GnuTLS takes
# part in secure renegotiation (data intact, its renegotiations equal to
# the server's count); rustls does not renegotiate (it answers the
# HelloRequest with a no_renegotiation warning alert): the server logs
# FATAL "client refused TLS renegotiation" with its hint and ends the
# session, which the client sees as a fatal handshake_failure alert,
# during the COPY TO or (mostly) once it is over.
#
# Skipped only when the clients' Debian packages are missing and cannot
# be installed (build.sh exits 77: not root).

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use SslrTest;

my $BUILD = File::Spec->rel2abs(dirname(__FILE__) . '/clients/build.sh');
my $bin = PostgreSQL::Test::Utils::tempdir('clients');

# Build both clients (test/t/021 compiles its Java client the same way).
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $BUILD, $bin ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(1200));
	my $rc = $? >> 8;
	plan skip_all => "the clients' Debian packages are missing: $err"
	  if $rc == 77;
	is($rc, 0, 'test/t/clients/build.sh builds gnutls_copy and rustls_copy')
	  or BAIL_OUT("test/t/clients/build.sh failed: $out$err");
	note $_ for grep { /^build\.sh:/ } split /\n/, $err;
}

my $ROWS = 600_000;       # about 66 MB each way
my $FILLER = 70;
my @LIMITS = ('16kB', '64kB', '1MB', 'default');
my $DEFAULT_GAP = 1.0;    # ssl_renegotiate.min_rekey_gap's default, seconds

# The real pace: the tests' nodes otherwise rotate at the old one
# (ssl_renegotiate.debug_min_rekey_gap = 0, SslrTest).
my $node = new_tls_node(
	'gnutls_rustls',
	real_pace => 1,
	conf => "ssl_renegotiate.tls12 = renegotiate\n");
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION ssl_renegotiate;
CREATE TABLE copy_in (i int, s text);
});
my $certs = $node->{_sslr_certs};
my $has_gap = $node->safe_psql('postgres',
	"SELECT count(*) FROM pg_settings WHERE name = 'ssl_renegotiate.min_rekey_gap'"
);
note $has_gap
  ? 'the server has ssl_renegotiate.min_rekey_gap'
  : 'the server has no ssl_renegotiate.min_rekey_gap: the gap bound is '
  . "checked at its default (${DEFAULT_GAP}s) and fails where it rotates faster";

my $out_md5 = series_copy_md5($node, $ROWS, $FILLER);

# byte_limit for new sessions (ALTER SYSTEM; 'default' resets it)
sub set_limit
{
	my ($limit) = @_;
	$node->safe_psql('postgres',
		$limit eq 'default'
		? 'ALTER SYSTEM RESET ssl_renegotiate.byte_limit'
		: "ALTER SYSTEM SET ssl_renegotiate.byte_limit = '$limit'");
	$node->reload;
	return;
}

# min_rekey_gap in postgresql.conf for the runs that need it (undef: out)
sub set_gap
{
	my ($gap) = @_;
	$node->adjust_conf('postgresql.conf', 'ssl_renegotiate.min_rekey_gap',
		undef);
	$node->append_conf('postgresql.conf',
		"ssl_renegotiate.min_rekey_gap = '$gap'")
	  if defined $gap;
	$node->reload;
	return;
}

# The gap in force for new sessions, in seconds.
sub gap_seconds
{
	return $DEFAULT_GAP unless $has_gap;
	my $ms = $node->safe_psql('postgres',
		"SELECT setting::float8 * CASE unit WHEN 's' THEN 1000 WHEN 'min' THEN 60000 ELSE 1 END "
		  . "FROM pg_settings WHERE name = 'ssl_renegotiate.min_rekey_gap'");
	return $ms / 1000;
}

# Runs client $which ('gnutls' or 'rustls') with --hold and @args.  While
# it holds (its work done, the session open) reads its backend's row.
# Returns a hashref: hold and final (the JSON lines, {} if none), row (the
# server's row while held), seconds (from start to the hold), exit,
# stderr.
sub run_client
{
	my ($which, $tls, @args) = @_;
	my @cmd = (
		"$bin/${which}_copy", '--host',
		'127.0.0.1', '--port',
		$node->port, '--cafile',
		$certs->{ca_crt}, '--tls',
		$tls, '--filler',
		$FILLER, '--appname',
		"${which}_tls$tls", '--hold',
		@args);
	my ($in, $out, $err) = ('', '', '');
	my %r = (hold => {}, final => {}, row => {});
	my $totals0 = totals_row($node);
	my $t0 = Time::HiRes::time();
	my $h = IPC::Run::start(\@cmd, '<', \$in, '>', \$out, '2>', \$err,
		IPC::Run::timeout(150));
	eval {
		$h->pump
		  while $h->pumpable && $out !~ /^\{.*"phase":"(?:hold|final)"/m;
		$r{seconds} = Time::HiRes::time() - $t0;
		if ($out =~ /^(\{.*"phase":"hold".*\})$/m)
		{
			$r{hold} = JSON::PP::decode_json($1);
			if ($r{hold}{pid} > 0)
			{
				settle($r{hold}{pid});
				$r{row} = activity_row($node, $r{hold}{pid}) // {};
			}
			$in .= "go\n";
		}
		$h->finish;
		1;
	} or do
	{
		$r{harness_error} = "$@";
		$h->kill_kill;
	};
	$r{exit} = $h->result(0);
	$r{stderr} = $err;
	$r{final} = JSON::PP::decode_json($1)
	  if $out =~ /^(\{.*"phase":"final".*\})$/m;
	# what the work did: the hold line, or the final one if it never held
	$r{work} = %{ $r{hold} } ? $r{hold} : $r{final};
	# the server's counts for the whole session, its row folded into the
	# totals once it has gone (a session that died never held)
	if (defined $r{work}{pid} && $r{work}{pid} > 0)
	{
		gone($r{work}{pid});
		my $totals1 = totals_row($node);
		$r{delta} = { map { $_ => $totals1->{$_} - $totals0->{$_} }
			  qw(rekeys_sent rekeys_received rekey_failures) };
	}
	$r{delta}   //= {};
	$r{seconds} //= Time::HiRes::time() - $t0;
	note "$which TLS $tls @args: " . ($out =~ s/\n+$//r);
	note "  stderr: $err" if $err ne '';
	note "  harness: $r{harness_error}" if $r{harness_error};
	note '  server row while held: ' . join(
		', ',
		map { "$_=" . ($r{row}{$_} // 'NULL') }
		  qw(version rekeys_sent rekeys_received rekey_failures rekeys_skipped
		  max_sent_per_key max_received_per_key rekey_pending));
	note '  the session in the totals: '
	  . join(', ',
		map { "$_=" . ($r{delta}{$_} // '?') } sort keys %{ $r{delta} });
	return \%r;
}

# Waits (10 s at most) until backend $pid is idle with a quiet socket, or
# gone.
sub settle
{
	my ($pid) = @_;
	for (1 .. 200)
	{
		my $state = $node->safe_psql('postgres',
			"SELECT state FROM pg_stat_activity WHERE pid = $pid");
		return if $state eq '';
		return if $state eq 'idle' && wait_idle($node, $pid, 5);
		Time::HiRes::usleep(50_000);
	}
	return;
}

# Waits (10 s at most) until backend $pid has exited.
sub gone
{
	my ($pid) = @_;
	for (1 .. 200)
	{
		return
		  if $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") == 0;
		Time::HiRes::usleep(50_000);
	}
	return;
}

my @table;    # the measured cells, noted at the end

# One line of the measured table: the cell, the server's rotations each
# way (its row while held, or the totals once a session died), seconds,
# the outcome.
sub cell_line
{
	my ($which, $label, $r) = @_;
	my $f = $r->{final};
	my $w = $r->{work};
	my ($sent, $recv) =
	  %{ $r->{row} }
	  ? ($r->{row}{rekeys_sent}, $r->{row}{rekeys_received})
	  : ($r->{delta}{rekeys_sent} // '?',
		$r->{delta}{rekeys_received} // '?');
	my $client =
	  $which eq 'gnutls'
	  ? sprintf(
		' (GnuTLS: %d KeyUpdates received, %d sent, %d renegotiations)',
		$w->{key_updates_received} // 0,
		$w->{key_updates_sent}     // 0,
		$w->{renegotiations}       // 0)
	  : '';
	my $outcome =
	  $f->{ok} ? 'ok'
	  : 'FAILED in '
	  . ($f->{stage} // '?') . ': '
	  . ($f->{error} // 'no JSON line')
	  . (
		($f->{server_error} // '') ne '' ? " [server: $f->{server_error}]"
		: '');
	return sprintf('%s | %s | %s | %.1f s | %s%s',
		$label, $sent, $recv, $r->{seconds}, $outcome, $client);
}

# The TLS 1.3 checks of one session: what it did ('out', 'in' or 'long')
# and which directions must rotate.
sub check_tls13
{
	my ($which, $label, $r, $what, $rotate_out, $rotate_in, $gap) = @_;
	my $f = $r->{final};
	my $row = $r->{row};

	ok($f->{ok} && $r->{exit} == 0, "$label: client finished without error")
	  or diag("$label: "
		  . ($f->{stage}        // '?') . ': '
		  . ($f->{error}        // 'no JSON line') . ' '
		  . ($f->{error_text}   // '') . ' '
		  . ($f->{server_error} // ''));
	is( $r->{work}{tls_version} // '',
		$which eq 'gnutls' ? 'TLS1.3' : 'TLSv1_3',
		"$label: the session is TLS 1.3");
	if ($what eq 'out')
	{
		is($r->{work}{out_md5} // 'none',
			$out_md5, "$label: COPY TO data intact (md5)");
	}
	elsif ($what eq 'in')
	{
		is( table_copy_md5($node, 'copy_in'),
			"$ROWS " . ($r->{work}{in_md5} // 'none'),
			"$label: COPY FROM data intact (rows and md5)");
	}
	else
	{
		is($r->{work}{queries} // 0,
			$r->{queries}, "$label: every query answered");
	}
	ok($f->{alive}, "$label: the session answers after the work");

	# the row while held; for a session that died, its totals
	my $sent = $row->{rekeys_sent} // $r->{delta}{rekeys_sent} // 0;
	my $recv = $row->{rekeys_received} // $r->{delta}{rekeys_received} // 0;
	my $bound = int($r->{seconds} / $gap) + 2;
	if ($rotate_out)
	{
		cmp_ok($sent, '>', 0, "$label: the server rotated its sending key");
	}
	else
	{
		is($sent, 0,
			"$label: no rotation of the server's key below the limit");
	}
	if ($rotate_in)
	{
		cmp_ok($recv, '>', 0, "$label: the client rotated its sending key");
	}
	else
	{
		is($recv, 0,
			"$label: no rotation of the client's key below the limit");
	}
	cmp_ok(
		$sent, '<=', $bound,
		sprintf(
			'%s: server KeyUpdates <= %.1f s / %s s + 2',
			$label, $r->{seconds}, $gap));
	cmp_ok(
		$recv, '<=', $bound,
		sprintf(
			'%s: client rotations <= %.1f s / %s s + 2',
			$label, $r->{seconds}, $gap));
	is($row->{rekey_failures} // 'no row', 0, "$label: no rekey failure");
	if ($which eq 'gnutls')
	{
		is($r->{work}{key_updates_received} // 'none',
			$sent,
			"$label: GnuTLS received as many KeyUpdates as the server sent");
		is($r->{work}{key_updates_sent} // 'none',
			$recv,
			"$label: GnuTLS sent as many KeyUpdates as the server received");
	}
	push @table, cell_line($which, $label, $r);
	return;
}

# ---------------------------------------------------------------------
# TLS 1.3: COPY TO, COPY FROM at each limit; the long session
# ---------------------------------------------------------------------
for my $which ('gnutls', 'rustls')
{
	for my $limit (@LIMITS)
	{
		set_limit($limit);
		my $gap = gap_seconds();
		my $rotates = $limit ne 'default';

		my $r = run_client($which, '1.3', '--copy-out', $ROWS);
		check_tls13($which, "$which TLS 1.3 COPY TO at $limit",
			$r, 'out', $rotates, 0, $gap);

		$node->safe_psql('postgres', 'TRUNCATE copy_in');
		$r = run_client($which, '1.3', '--copy-in', $ROWS);
		# a COPY FROM's requests rotate the server's key as well
		check_tls13($which, "$which TLS 1.3 COPY FROM at $limit",
			$r, 'in', $rotates, $rotates, $gap);
	}

	# The long session: 300 queries, each 20 kB each way, 10 ms apart.
	set_limit('16kB');
	my $r = run_client($which, '1.3', '--long', 300, '--payload', 20000,
		'--pause-ms', 10);
	$r->{queries} = 300;
	check_tls13($which, "$which TLS 1.3 long session at 16kB",
		$r, 'long', 1, 1, gap_seconds());

	# At the floor of min_rekey_gap: 4 rotations a second at most, still
	# fewer than GnuTLS's 8 per 1000 ms.
	set_gap('250ms');
	my $gap = $has_gap ? gap_seconds() : 0.25;
	$r = run_client($which, '1.3', '--copy-out', $ROWS);
	check_tls13($which, "$which TLS 1.3 COPY TO at 16kB, gap 250ms",
		$r, 'out', 1, 0, $gap);
	$r = run_client($which, '1.3', '--long', 300, '--payload', 20000,
		'--pause-ms', 10);
	$r->{queries} = 300;
	check_tls13($which, "$which TLS 1.3 long session at 16kB, gap 250ms",
		$r, 'long', 1, 1, $gap);
	set_gap(undef);
}

# ---------------------------------------------------------------------
# TLS 1.2, ssl_renegotiate.tls12 = renegotiate, 64kB
# ---------------------------------------------------------------------
set_limit('64kB');
{
	my $label = 'gnutls TLS 1.2 renegotiate at 64kB';
	$node->safe_psql('postgres', 'TRUNCATE copy_in');
	my $rows = $ROWS / 2;
	my $r =
	  run_client('gnutls', '1.2', '--copy-out', $rows, '--copy-in', $rows);
	my $f = $r->{final};
	my $row = $r->{row};
	ok($f->{ok} && $r->{exit} == 0, "$label: client finished without error")
	  or diag("$label: "
		  . ($f->{stage}        // '?') . ': '
		  . ($f->{error}        // 'no JSON line') . ' '
		  . ($f->{error_text}   // '') . ' '
		  . ($f->{server_error} // ''));
	is($r->{work}{tls_version} // '',
		'TLS1.2', "$label: the session is TLS 1.2");
	is( $r->{work}{out_md5} // 'none',
		series_copy_md5($node, $rows, $FILLER),
		"$label: COPY TO data intact (md5)");
	is( table_copy_md5($node, 'copy_in'),
		"$rows " . ($r->{work}{in_md5} // 'none'),
		"$label: COPY FROM data intact (rows and md5)");
	ok($f->{alive}, "$label: the session answers after the work");
	cmp_ok($r->{work}{renegotiations} // 0,
		'>', 0, "$label: GnuTLS renegotiated");
	is( $r->{work}{renegotiations} // 'none',
		$row->{rekeys_sent} // 'no row',
		"$label: GnuTLS's renegotiations equal the server's rekeys_sent");
	is( $row->{rekeys_received} // 'none',
		$row->{rekeys_sent}     // 'no row',
		"$label: each renegotiation counted in both directions");
	is($row->{rekey_failures} // 'no row', 0, "$label: no rekey failure");
	push @table, cell_line('gnutls', $label, $r);
}
{
	my $label = 'rustls TLS 1.2 renegotiate at 64kB';
	my $log = -s $node->logfile;
	my $r = run_client('rustls', '1.2', '--copy-out', $ROWS);
	my $f = $r->{final};
	my $server_log = slurp_file($node->logfile, $log);

	# rustls 0.20 answers a HelloRequest with a no_renegotiation warning
	# alert (conn.rs, process_main_protocol) and goes on reading.  The
	# server meets the alert only at the end of the COPY TO: the whole COPY
	# (5 runs in 6 here) or all but its last 2 kB (1 in 6) arrived under
	# the key of the first handshake.  Its OpenSSL then sends a fatal
	# handshake_failure alert, which is what the client sees (not the
	# FATAL's ErrorResponse), and the session ends.
	is($r->{work}{tls_version} // '',
		'TLSv1_2', "$label: the session is TLS 1.2");
	ok(!$f->{ok},
		"$label: the session does not survive the refused renegotiation");
	like($f->{stage} // '',
		qr/^(?:copy_out|alive)$/,
		"$label: it ends during the COPY TO or at the next query");
	like(
		$f->{error_text} // '',
		qr/received fatal alert: HandshakeFailure/,
		"$label: rustls reports the server's fatal handshake_failure alert");
	if (($f->{stage} // '') eq 'alive')
	{
		is($r->{work}{out_md5} // 'none',
			$out_md5,
			"$label: the COPY TO arrived whole before the end (md5)");
	}
	like(
		$server_log,
		qr/FATAL:  client refused TLS renegotiation\n.*DETAIL:  .*no_renegotiation alert.*\n.*HINT:  This client cannot renegotiate\. Exempt its role with ALTER ROLE postgres SET ssl_renegotiate\.tls12 = 'warn', or have it use TLS 1\.3\./,
		"$label: the server logs FATAL \"client refused TLS renegotiation\" with its hint"
	);
	is($r->{delta}{rekey_failures} // 'none', 1,
		"$label: rekey_failures + 1");
	is($r->{delta}{rekeys_sent} // 'none', 0, "$label: no rotation counted");
	note "$label: the client saw: "
	  . ($f->{stage}        // '?') . ': '
	  . ($f->{error}        // '?') . ' / '
	  . ($f->{server_error} // '') . ' / '
	  . ($f->{error_text}   // '');
	push @table, cell_line('rustls', $label, $r);
}

note "cell | server rekeys_sent | server rekeys_received | seconds | result";
note $_ for @table;

$node->stop;
done_testing();
