
# What ssl_renegotiate_totals counts, and who sees what in it.
#
# What this proves, on a TLS node with the extension preloaded:
#
#  1. A plain role learns nothing through the totals that the activity
#     view hides from it: while a superuser's TLS session runs a query, the
#     plain role's totals do not move (its own session is not TLS); a
#     member of pg_read_all_stats sees the query's bytes at once.  When the
#     superuser's session exits, its traffic is folded in and every role
#     sees it (the README's rule, like pg_stat_database's flush).
#  2. A reset while that session is live: afterwards no reader is shown
#     any of the session's earlier traffic, nor a negative number, and its
#     later traffic arrives, for the plain role at its exit.
#  3. Connections that end before authentication by _exit() are counted,
#     with their bytes, equal to the kernel's counts of the client's socket
#     less the SSLRequest exchange: a TLS handshake followed by silence
#     until authentication_timeout, and one ended by SIGTERM while the
#     server waits for its startup packet.  PostgreSQL ends both with
#     _exit(1), which runs no exit callback.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $peer = build_hostile_peer();

my $node = new_tls_node('totals', conf => "authentication_timeout = '1s'");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION ssl_renegotiate;
	CREATE ROLE regress_plain LOGIN;
	CREATE ROLE regress_monitor LOGIN;
	GRANT pg_read_all_stats TO regress_monitor;
});

my @COUNTERS = qw(bytes_sent bytes_received records_sent records_received);

# The totals as role $user sees them, over the Unix socket (not TLS, so
# the reading session itself adds nothing).
sub totals_as
{
	my ($user) = @_;
	return query_row_hash(
		$node,
		'SELECT * FROM ssl_renegotiate_totals',
		connstr => $node->connstr('postgres') . " user=$user");
}

# The totals a role without pg_read_all_stats reads: every counter NULL,
# whatever other roles did, live or exited (docs/reference.md, "Who sees
# what").
sub all_hidden
{
	my ($t) = @_;
	return !grep { defined $t->{$_} } @COUNTERS, 'connections';
}

sub same_counters
{
	my ($a, $b) = @_;
	return !grep { $a->{$_} != $b->{$_} } @COUNTERS;
}

sub delta
{
	my ($t0, $t1, $k) = @_;
	return $t1->{$k} - $t0->{$k};
}

# ---------------------------------------------------------------------
# 1. a superuser's traffic is hidden from a plain role, live and exited
# ---------------------------------------------------------------------
{
	my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');

	my $plain0 = totals_as('regress_plain');
	my $monitor0 = totals_as('regress_monitor');
	$s->query_safe(q{SELECT repeat('x', 100000)});
	my $plain1 = totals_as('regress_plain');
	my $monitor1 = totals_as('regress_monitor');

	ok( all_hidden($plain0) && all_hidden($plain1),
		'plain role: the totals are hidden while a superuser session sent 100 kB'
	) or diag explain [ $plain0, $plain1 ];
	ok(defined $plain1->{stats_reset},
		'plain role: ... but not the time of the last reset');
	cmp_ok(delta($monitor0, $monitor1, 'bytes_sent'),
		'>=', 100000, 'pg_read_all_stats: sees the 100 kB at once');
	cmp_ok(delta($monitor0, $monitor1, 'bytes_received'),
		'>', 0, 'pg_read_all_stats: sees the query it received');

	my $row = query_row_hash(
		$node,
		"SELECT * FROM ssl_renegotiate_activity WHERE pid = $pid",
		connstr => $node->connstr('postgres') . ' user=regress_plain');
	ok($row && !defined $row->{bytes_sent},
		'plain role: the activity row hides the same session');

	$s->quit;
	ok(wait_backends_gone($node, $pid), 'the superuser session exited');
	my $plain2 = totals_as('regress_plain');
	my $monitor2 = totals_as('regress_monitor');
	ok(all_hidden($plain2),
		'plain role: the totals stay hidden after the session exited')
	  or diag explain $plain2;
	cmp_ok(delta($monitor1, $monitor2, 'connections'),
		'==', 0, 'pg_read_all_stats: the exit moves no connection');
	ok( same_counters($monitor1, $monitor2)
		  || delta($monitor1, $monitor2, 'bytes_sent') < 100,
		'pg_read_all_stats: the exit moves at most the closing alert'
	) or diag explain [ $monitor1, $monitor2 ];
}

# ---------------------------------------------------------------------
# 2. a reset while a hidden session is live
# ---------------------------------------------------------------------
{
	my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe(q{SELECT repeat('x', 200000)});

	$node->safe_psql('postgres', 'SELECT ssl_renegotiate_reset()');
	my $t = totals_as('regress_monitor');
	ok( !grep({ $t->{$_} != 0 } @COUNTERS, 'connections'),
		"regress_monitor: all zero right after the reset") or diag explain $t;
	ok( all_hidden(totals_as('regress_plain')),
		'regress_plain: hidden right after the reset');

	$s->query_safe(q{SELECT repeat('x', 50000)});
	my $plain = totals_as('regress_plain');
	my $monitor = totals_as('regress_monitor');
	ok(all_hidden($plain), 'regress_plain: hidden while the session is live')
	  or diag explain $plain;
	cmp_ok($monitor->{bytes_sent},
		'>=', 50000, 'regress_monitor: the 50 kB sent since the reset');
	cmp_ok($monitor->{bytes_sent},
		'<', 100000,
		'regress_monitor: ... and none of the 200 kB sent before it');

	$s->quit;
	ok(wait_backends_gone($node, $pid), 'the session exited');
	ok( all_hidden(totals_as('regress_plain')),
		'regress_plain: hidden after the session exited');
	$monitor = totals_as('regress_monitor');
	cmp_ok($monitor->{bytes_sent},
		'>=', 50000,
		'regress_monitor: the traffic since the reset, after the exit');
	cmp_ok($monitor->{bytes_sent},
		'<', 100000,
		'regress_monitor: ... without what was sent before the reset');
	is($monitor->{connections},
		0, 'connections: the session connected before the reset');
}

# ---------------------------------------------------------------------
# 3. connections that end by _exit() before authentication
# ---------------------------------------------------------------------

sub check_early_exit
{
	my ($what, %opts) = @_;
	my $t0 = totals_row($node);
	my $r = run_hostile_peer(
		$peer, $node,
		args => [ '--no-startup', 'silence' ],
		%opts);
	is($r->{result}, 'closed', "$what: the server closed the connection");
	like($r->{tcp_bytes_acked}, qr/^\d+$/,
		"$what: the client's kernel counts");

	my $t1 = totals_row($node);
	is(delta($t0, $t1, 'connections'), 1, "$what: the connection is counted");

	# On the connecting side the kernel's counts include one sequence
	# number for our SYN (bytes_acked) and one for the server's FIN
	# (bytes_received).
	is( delta($t0, $t1, 'bytes_received'),
		$r->{tcp_bytes_acked} - 1 - SSL_REQUEST_CLIENT_BYTES,
		"$what: bytes_received = what the client's kernel sent, less SYN and SSLRequest"
	);
	# The client's count holds the server's FIN (one sequence number) when
	# the backend's exit closed the socket; when it exits with input unread
	# the kernel resets the connection instead, and an RST takes none (seen
	# once on 17 in a fresh root).  Either way exact to that one number.
	my $sent = delta($t0, $t1, 'bytes_sent');
	my $on_wire = $r->{tcp_bytes_received} - SSL_REQUEST_SERVER_BYTES;
	ok( $sent == $on_wire - 1 || $sent == $on_wire,
		"$what: bytes_sent = what the client's kernel received, less the answer 'S' and the FIN if any"
	  )
	  or diag(
		"bytes_sent $sent, the client's kernel $r->{tcp_bytes_received}, io: $r->{io_error}"
	  );
	cmp_ok(delta($t0, $t1, 'records_received'),
		'>=', 2, "$what: its handshake records are counted");
	return;
}

check_early_exit('authentication_timeout after the handshake');

$node->append_conf('postgresql.conf', "authentication_timeout = '60s'");
$node->reload;
$node->poll_query_until('postgres',
	"SELECT current_setting('authentication_timeout') = '1min'")
  or die 'authentication_timeout not reloaded';

my $killed;
check_early_exit(
	'SIGTERM while waiting for the startup packet',
	holds => {
		silent => sub {
			my $pid = backend_of_client_port($node, $_[0]->{client_port});
			$killed = defined $pid && kill('TERM', $pid);
		}
	});
ok($killed,
	'SIGTERM while waiting for the startup packet: the backend was found and signalled'
);

unlike(
	slurp_file($node->logfile),
	qr/terminated by signal|server process .* was terminated/,
	'no backend crashed');

done_testing();
