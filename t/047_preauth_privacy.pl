
# Traffic before authentication reaches no other role's totals until the
# connection ends.
#
# What this proves, on a TLS node with the extension preloaded, where role
# regress_victim logs in over hostssl with the "password" method, with
# hostile_peer (t/peer/) as the client, which holds after the server asks
# for the password and after authentication:
#
#  1. A login that waits for its password, then authenticates and runs a
#     query: at each hold a plain role's totals are unchanged in every
#     column (its own session is not TLS), so neither the handshake, the
#     startup packet nor the PasswordMessage (the password's length + 28
#     bytes) ever shows, one record at a time or as one jump at login.  A
#     member of pg_read_all_stats sees the pending connection live.  Once
#     the victim has ended, everyone's totals grow by exactly what the
#     session's activity row said just before, plus its Terminate record,
#     and by the kernel's counts of the client's socket less the SSLRequest
#     exchange and the server's close_notify, which leaves after the
#     session was folded in (the client sends none: the server would not
#     read it).
#  2. A login with a wrong password: nothing shows while it waits; after
#     its FATAL it arrives, equal to the kernel's counts (less the same).
#  3. A handshake the server refuses (no cipher in common), and a
#     connection silent after its handshake and ended by SIGTERM while the
#     server waits for its startup packet (_exit(): no exit callback): the
#     plain role sees nothing while the latter is open, and both arrive
#     once they ended, equal to the kernel's counts.
#  4. A reset while such a connection waits: zero for every reader, while
#     it waits and after it ended (its bytes are from before the reset).
#  5. A clean restart while one waits: its bytes are in the totals the
#     server keeps across the restart.
#  6. A dead-end backend (refused during a smart shutdown: it has no child
#     slot of its own), silent after its handshake and ended by SIGTERM:
#     hidden from a plain role while it waits, counted once it ended.
#
# Run as the OS user owning the tree (see t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);
use Test::More;
use SslrTest;

my $peer = build_hostile_peer();

my $node = new_tls_node('preauth');
my $hba  = $node->data_dir . '/pg_hba.conf';
my $rest = slurp_file($hba);
open(my $fh, '>', $hba) or die "cannot write $hba: $!";
print $fh "hostssl all regress_victim 127.0.0.1/32 password\n", $rest;
close($fh);
$node->start;

my $PASSWORD = 'correct horse battery staple';
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION ssl_renegotiate;
	CREATE ROLE regress_plain LOGIN;
	CREATE ROLE regress_monitor LOGIN;
	GRANT pg_read_all_stats TO regress_monitor;
	SET password_encryption = 'scram-sha-256';
	CREATE ROLE regress_victim LOGIN PASSWORD '$PASSWORD';
});

# A close_notify alert in a TLS 1.3 record: 5 bytes of header, 2 of alert,
# 1 of inner content type, a 16-byte tag.
use constant CLOSE_NOTIFY_RECORD => 5 + 2 + 1 + 16;
# The Terminate message ('X', length 4) in one TLS 1.3 record.
use constant TERMINATE_RECORD => 5 + 5 + 1 + 16;

# Every column of the totals as role $user sees them over the Unix socket
# (not TLS: the reading session adds nothing), but stats_reset.
sub totals_as
{
	my ($user) = @_;
	my $t = query_row_hash($node, 'SELECT * FROM ssl_renegotiate_totals',
		connstr => $node->connstr('postgres') . " user=$user");
	delete $t->{stats_reset};
	return $t;
}

sub delta
{
	my ($t0, $t1, $k) = @_;
	return $t1->{$k} - $t0->{$k};
}

# Poll as regress_plain until the totals show $n more connections than $t0.
sub plain_sees_connections
{
	my ($t0, $n) = @_;
	my $want = $t0->{connections} + $n;
	return $node->poll_query_until('postgres',
		"SELECT connections = $want FROM ssl_renegotiate_totals",
		't', connstr => $node->connstr('postgres') . ' user=regress_plain');
}

# The totals grew by the kernel's counts of the client's socket, less the
# SYN and FIN (if any), the SSLRequest exchange and $unseen_in/_out bytes the server
# sent or received after the connection was folded in.
sub matches_kernel
{
	my ($what, $t0, $t1, $r, $unseen_in, $unseen_out) = @_;
	like($r->{tcp_bytes_acked}, qr/^\d+$/, "$what: the client's kernel counts")
	  or return;
	is( delta($t0, $t1, 'bytes_received'),
		$r->{tcp_bytes_acked} - 1 - SSL_REQUEST_CLIENT_BYTES - $unseen_in,
		"$what: bytes_received = what the client's kernel sent, less SYN and SSLRequest"
	);
	# The client's count holds the server's FIN (one sequence number) when
	# the server closed; a backend that exits with unread input resets the
	# connection instead, and an RST takes none.  Either way to the byte.
	my $sent     = delta($t0, $t1, 'bytes_sent');
	my $on_wire  = $r->{tcp_bytes_received} - SSL_REQUEST_SERVER_BYTES - $unseen_out;
	ok( $sent == $on_wire - 1 || $sent == $on_wire,
		"$what: bytes_sent = what the client's kernel received, less 'S' and the FIN if any"
	) or diag("bytes_sent $sent, the client's kernel $r->{tcp_bytes_received}");
	return;
}

my @PEER = ('--user', 'regress_victim', '--wait-close');

# ---------------------------------------------------------------------
# 1. a password login, held before the password and after authentication
# ---------------------------------------------------------------------
{
	my $plain0   = totals_as('regress_plain');
	my $monitor0 = totals_as('regress_monitor');
	my (%plain, %monitor, $row);
	my $r = run_hostile_peer(
		$peer, $node,
		args  => [ @PEER, '--password', $PASSWORD, 'idle-then-query' ],
		holds => {
			password_requested => sub {
				$plain{asked}   = totals_as('regress_plain');
				$monitor{asked} = totals_as('regress_monitor');
			},
			idle => sub {
				$plain{authenticated}   = totals_as('regress_plain');
				$monitor{authenticated} = totals_as('regress_monitor');
			},
			end => sub {
				$plain{end} = totals_as('regress_plain');
				$row = activity_row($node, $_[0]->{pid});
			},
		});
	is($r->{result}, 'ok', 'the victim logged in and ran its queries');

	for my $at ('asked', 'authenticated', 'end')
	{
		is_deeply($plain{$at}, $plain0,
			"plain role: no column of the totals moved ($at)");
	}
	is(delta($monitor0, $monitor{asked}, 'connections'),
		1, 'pg_read_all_stats: sees the pending connection');
	cmp_ok(delta($monitor0, $monitor{asked}, 'records_received'),
		'>=', 3, 'pg_read_all_stats: ... its handshake and startup packet');
	cmp_ok(
		delta($monitor{asked}, $monitor{authenticated}, 'bytes_received'),
		'>=', length($PASSWORD) + 28,
		'pg_read_all_stats: ... and the PasswordMessage');

	ok(defined $row && defined $row->{bytes_sent},
		'the victim session has its activity row');
	ok(plain_sees_connections($plain0, 1),
		'plain role: the victim connection arrives once it ended');
	my $plain1 = totals_as('regress_plain');
	is(delta($plain0, $plain1, 'bytes_received'),
		$row->{bytes_received} + TERMINATE_RECORD,
		'bytes_received: the activity row, handshake included, and Terminate');
	is(delta($plain0, $plain1, 'records_received'),
		$row->{records_received} + 1,
		'records_received: the activity row and Terminate');
	is(delta($plain0, $plain1, 'bytes_sent'),
		$row->{bytes_sent}, 'bytes_sent: the activity row');
	is(delta($plain0, $plain1, 'records_sent'),
		$row->{records_sent}, 'records_sent: the activity row');
	matches_kernel('password login', $plain0, $plain1, $r, 0,
		CLOSE_NOTIFY_RECORD);
	is_deeply(totals_as('regress_monitor'),
		$plain1, 'afterwards every role reads the same totals');
}

# ---------------------------------------------------------------------
# 2. a wrong password
# ---------------------------------------------------------------------
{
	my $plain0 = totals_as('regress_plain');
	my $asked;
	my $r = run_hostile_peer(
		$peer, $node,
		args  => [ @PEER, '--password', 'wrong', 'idle-then-query' ],
		holds => { password_requested => sub { $asked = totals_as('regress_plain') } });
	is($r->{result}, 'fatal', 'wrong password: the login failed');
	like($r->{server_error} // '', qr/password authentication failed/,
		'wrong password: ... in the password method');
	is_deeply($asked, $plain0,
		'wrong password: plain role: nothing moved while it waited');
	ok(plain_sees_connections($plain0, 1),
		'wrong password: plain role: the connection arrives once it ended');
	matches_kernel('wrong password', $plain0, totals_as('regress_plain'),
		$r, 0, CLOSE_NOTIFY_RECORD);
}

# ---------------------------------------------------------------------
# 3. a refused handshake, and a silent connection ended by SIGTERM
# ---------------------------------------------------------------------
{
	my $plain0 = totals_as('regress_plain');
	my $r      = run_hostile_peer($peer, $node,
		args => [ @PEER, '--tls', '1.2', '--cipher', 'ECDHE-ECDSA-AES128-GCM-SHA256',
			'idle-then-query' ]);
	is($r->{result}, 'tls_error', 'refused handshake: no cipher in common');
	ok(plain_sees_connections($plain0, 1),
		'refused handshake: plain role: the connection arrives once it ended');
	my $plain1 = totals_as('regress_plain');
	matches_kernel('refused handshake', $plain0, $plain1, $r, 0, 0);
	cmp_ok(delta($plain0, $plain1, 'records_sent'),
		'>=', 1, 'refused handshake: the server\'s alert is counted');
}

# The server-side socket of the connection from the client's port: the
# backend's pid.
sub backend_of_client_port
{
	my ($client_port) = @_;
	my $port = $node->port;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'ss', '-tnpH', 'state', 'established',
			"( sport = :$port and dport = :$client_port )"
		],
		'<', \undef, '>', \$out, '2>', \$err) or die "ss failed: $err";
	return $out =~ /\bpid=(\d+),/ ? $1 : undef;
}

{
	my $plain0   = totals_as('regress_plain');
	my $monitor0 = totals_as('regress_monitor');
	my ($silent_plain, $silent_monitor, $killed);
	my $r = run_hostile_peer(
		$peer, $node,
		args  => [ '--no-startup', 'silence' ],
		holds => {
			silent => sub {
				$silent_plain   = totals_as('regress_plain');
				$silent_monitor = totals_as('regress_monitor');
				my $pid = backend_of_client_port($_[0]->{client_port});
				$killed = defined $pid && kill('TERM', $pid);
			}
		});
	ok($killed, 'silent connection: the backend was found and signalled');
	is($r->{result}, 'closed', 'silent connection: the server closed it');
	is_deeply($silent_plain, $plain0,
		'silent connection: plain role: nothing moved while it was open');
	is(delta($monitor0, $silent_monitor, 'connections'),
		1, 'silent connection: pg_read_all_stats sees it live');
	ok(plain_sees_connections($plain0, 1),
		'silent connection: plain role: it arrives once it ended');
	matches_kernel('silent connection', $plain0, totals_as('regress_plain'),
		$r, 0, 0);
}

# Wait until the process is gone (reaped: kill 0 fails only then).
sub wait_process_gone
{
	my ($pid) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1 unless kill(0, $pid);
		usleep(100_000);
	}
	return 0;
}

# ---------------------------------------------------------------------
# 4. a reset while a connection waits for its startup packet
# ---------------------------------------------------------------------
{
	my ($after_reset, $pid);
	my $r = run_hostile_peer(
		$peer, $node,
		args  => [ '--no-startup', 'silence' ],
		holds => {
			silent => sub {
				$node->safe_psql('postgres', 'SELECT ssl_renegotiate_reset()');
				$after_reset = totals_as('regress_monitor');
				$pid = backend_of_client_port($_[0]->{client_port});
				kill('TERM', $pid) if defined $pid;
			}
		});
	is($r->{result}, 'closed', 'reset: the pending connection was ended');
	ok(defined $pid && wait_process_gone($pid), 'reset: its backend is gone');
	my $zero = { map { $_ => 0 } keys %$after_reset };
	is_deeply($after_reset, $zero,
		'reset: pg_read_all_stats: zero with a connection pending');
	is_deeply(totals_as('regress_plain'),
		$zero, 'reset: plain role: zero after it ended (before the reset)');
	is_deeply(totals_as('regress_monitor'),
		$zero, 'reset: pg_read_all_stats: zero after it ended too');
}

# ---------------------------------------------------------------------
# 5. a clean restart while a connection waits for its startup packet
# ---------------------------------------------------------------------
{
	my $plain0 = totals_as('regress_plain');
	my $r      = run_hostile_peer(
		$peer, $node,
		args  => [ '--no-startup', 'silence' ],
		holds => { silent => sub { $node->stop('fast') } });
	is($r->{result}, 'closed', 'restart: the shutdown ended the pending connection');
	$node->start;
	my $plain1 = totals_as('regress_plain');
	is(delta($plain0, $plain1, 'connections'),
		1, 'restart: the connection is in the totals kept across the restart');
	matches_kernel('restart', $plain0, $plain1, $r, 0, 0);
}

# ---------------------------------------------------------------------
# 6. a dead-end backend: refused during a smart shutdown
# ---------------------------------------------------------------------
{
	# A superuser session over the Unix socket (not counted) keeps the
	# server up and reads the totals, as itself and as regress_plain.
	my $s = $node->background_psql('postgres');
	my $totals_as_plain = sub {
		my $json = $s->query_safe(
			q{SET ROLE regress_plain;
			  SELECT row_to_json(x) FROM (SELECT * FROM ssl_renegotiate_totals) x;
			  RESET ROLE;});
		my $t = JSON::PP::decode_json($json);
		delete $t->{stats_reset};
		return $t;
	};
	my $plain0 = $totals_as_plain->();
	$node->command_ok([ 'pg_ctl', '-D', $node->data_dir, '-m', 'smart', '-W', 'stop' ],
		'dead end: a smart shutdown begins');

	my ($held_plain, $held_super, $killed);
	my $r = run_hostile_peer(
		$peer, $node,
		args  => [ '--no-startup', 'silence' ],
		holds => {
			silent => sub {
				$held_plain = $totals_as_plain->();
				my $json = $s->query_safe(
					'SELECT row_to_json(x) FROM (SELECT * FROM ssl_renegotiate_totals) x');
				$held_super = JSON::PP::decode_json($json);
				my $pid = backend_of_client_port($_[0]->{client_port});
				$killed = defined $pid && kill('TERM', $pid);
			}
		});
	ok($killed, 'dead end: the backend was found and signalled');
	is_deeply($held_plain, $plain0,
		'dead end: plain role: nothing moved while it was open');
	is(delta($plain0, $held_super, 'connections'),
		1, 'dead end: a superuser sees it live');
	my $arrived = 0;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		last if ($arrived = $totals_as_plain->()->{connections} == $plain0->{connections} + 1);
		usleep(100_000);
	}
	ok($arrived, 'dead end: plain role: it arrives once it ended');
	matches_kernel('dead end', $plain0, $totals_as_plain->(), $r, 0, 0);
	$s->quit;
	# the shutdown ends with the session; wait for it (or find it over)
	$node->stop('smart', fail_ok => 1);
}

unlike(slurp_file($node->logfile),
	qr/terminated by signal|server process .* was terminated/,
	'no backend crashed');

done_testing();
