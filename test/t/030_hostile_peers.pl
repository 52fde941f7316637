
# Hostile TLS peers: what the server does with clients that misuse key
# rotation.  test/t/peer/ (hostile_peer, compiled here against libssl) speaks
# just enough of the PostgreSQL protocol to do what libpq never does.
#
# What this proves, on a TLS node with the extension preloaded:
#
#  1. A TLS 1.3 client sending 1000 KeyUpdate(update_not_requested) in a
#     row (more than ssl_renegotiate.max_peer_key_updates = 32, the burst a
#     client may send at once) is ended:
#     its query after the flood gets no answer, the server log says why
#     ("... sent 33 key updates unasked, faster than ... (32) allows"),
#     totals.terminations grows by 1 and totals.rekeys_received by >= 33
#     (the flood was counted), and other sessions go on.
#  2. The same with update_requested (the server answers each with a
#     KeyUpdate of its own): ended just the same, the answers bounded by
#     the requests.
#     And the bound bounds the work: when a long run (20000) is already
#     queued as the server reads (its query waited for a lock meanwhile),
#     the server stops at the bound instead of processing the whole run.
#  3. 20 KeyUpdates in a row (<= 32) are fine: the query is answered and
#     the activity row shows rekeys_received = 20.
#  4. The bound is a budget, not a run: a client that sends a KeyUpdate
#     before every byte of a 5,000-byte query (never two in a row) is
#     ended just the same, after about 32; 30 KeyUpdates each followed by a
#     query are fine; and a client rotating its key every 64 kB through a
#     20 MB COPY FROM (320 rotations) is never ended.
#  5. With max_peer_key_updates = 0 (off) the 1000-flood is fine; so is
#     a 1000-flood sent before authentication, and those rotations are
#     counted in rekeys_received like the others ("every key rotation").
#  6. KeyUpdates in a row sent before authentication (right after the TLS
#     handshake, before the StartupMessage) are bounded the same way.
#  7. A client that never reads (never answers the server's KeyUpdate
#     requests, never rotates its key) during an 80 MB COPY FROM, with
#     limit = 64kB and hard_limit = 65MB (the smallest above it) is ended; the log names
#     hard_limit; terminations grows; nothing of the COPY is committed;
#     a bystander session is unaffected.  With hard_limit = 0 the same
#     client completes the COPY (every row committed) and the server shows
#     that the peer really never rotated: one key carried >= 19 MB.
#  8. A client that crosses hard_limit inside a CopyData message and then
#     goes silent is ended too (it must not keep its session, and its open
#     transaction, once the extension decided to end it).
#  9. A TLS 1.2 client-initiated renegotiation is refused under each
#     ssl_renegotiate.tls12 value (renegotiate, warn, terminate): no
#     renegotiation happens, renegotiations_refused of that backend grows
#     while it is connected, and in the totals.
# 10. A TLS 1.2 client that refuses renegotiation (SSL_OP_NO_RENEGOTIATION)
#     reading a 300 kB row at limit = 64kB: under tls12 = renegotiate it is
#     ended ("client refused TLS renegotiation", rekey_failures grows);
#     under warn it gets the whole row (rekeys_skipped grows).
# 11. Throughout: no backend crashed (no "terminated by signal" / "server
#     process" lines in the whole log, the totals were never reset by a
#     crash restart) and the postmaster still runs.
#
# Nothing here asserts on time.  The only deadline is in 8: a session
# that should have ended is given 15 s to disappear (a correct server needs
# milliseconds; a stuck one never ends), so that a failure does not cost
# the default 180 s.
#
# Run (as the owner of a copy of the tree, not root):
#   PATH=/usr/lib/postgresql/15/bin:$PATH \
#   PG_REGRESS=/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
#   TESTDIR=$PWD prove -I test/t -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl \
#   test/t/030_hostile_peers.pl

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $MB = 1024 * 1024;

# ---------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------
my $peer = build_hostile_peer();

# ---------------------------------------------------------------------
# The node
# ---------------------------------------------------------------------
my $node = new_tls_node('hostile');
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION ssl_renegotiate; CREATE TABLE hp_copy (x text);');
my $stats_reset0 = totals_row($node)->{stats_reset};

sub run_peer { return run_hostile_peer($peer, $node, @_); }

# ALTER SYSTEM SET/RESET ssl_renegotiate.* and wait until new sessions see
# it.  Pairs of name => [value, as SHOW prints it]; undef value = RESET.
sub set_conf
{
	my (@pairs) = @_;
	my (@sql, @cond);
	while (my ($name, $v) = splice(@pairs, 0, 2))
	{
		if (defined $v->[0])
		{
			push @sql, "ALTER SYSTEM SET ssl_renegotiate.$name = '$v->[0]'";
		}
		else
		{
			push @sql, "ALTER SYSTEM RESET ssl_renegotiate.$name";
		}
		push @cond, "current_setting('ssl_renegotiate.$name') = '$v->[1]'";
	}
	$node->safe_psql('postgres', $_) for @sql;
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$node->poll_query_until('postgres', 'SELECT ' . join(' AND ', @cond))
	  or die "settings not applied: @cond";
	return;
}

sub server_ok
{
	my ($what) = @_;
	is( $node->safe_psql(
			'postgres', 'SELECT 42',
			connstr => tls_connstr($node, tls => '1.3')),
		'42',
		"$what: another TLS session queries fine");
}

sub delta
{
	my ($t0, $t1, $k) = @_;
	return $t1->{$k} - $t0->{$k};
}

# ---------------------------------------------------------------------
# 1, 2. KeyUpdate floods, unrequested and requested
# ---------------------------------------------------------------------
for my $flood ('keyupdate-flood', 'keyupdate-requested-flood')
{
	my $t0 = totals_row($node);
	my $pos = log_position($node);
	my $r = run_peer(args => [ $flood, 1000 ]);
	my $pid = $r->{pid};

	like($pid, qr/^\d+$/, "$flood 1000: connected (pid)");
	is($r->{ready}, 1, "$flood 1000: reached ReadyForQuery");
	isnt($r->{query_result}, 'ok',
		"$flood 1000: the query after the flood is not answered");
	like($r->{result}, qr/^(closed|tls_error)$/,
		"$flood 1000: the client sees its connection closed");
	ok(wait_backends_gone($node, $pid), "$flood 1000: the backend exited");

	my $log = log_since($node, $pos);
	like(
		$log,
		qr/ssl_renegotiate: terminated connection of pid $pid: the client sent 33 key updates unasked, faster than ssl_renegotiate\.max_peer_key_updates \(32\) allows/,
		"$flood 1000: server log says why (33 at once > 32)");

	my $t1 = totals_row($node);
	is(delta($t0, $t1, 'terminations'),
		1, "$flood 1000: totals.terminations grew by 1");
	cmp_ok(delta($t0, $t1, 'rekeys_received'),
		'>=', 33, "$flood 1000: the flood was counted (rekeys_received)");
	cmp_ok(delta($t0, $t1, 'rekeys_received'),
		'<=', 1000, "$flood 1000: ... and not more than was sent");
	if ($flood eq 'keyupdate-requested-flood')
	{
		# each requested update is answered with one of ours, no more
		# (OpenSSL sends an answer at its next I/O: the last one may never
		# go out)
		cmp_ok(
			delta($t0, $t1, 'rekeys_sent'),
			'>=',
			delta($t0, $t1, 'rekeys_received') - 1,
			"$flood 1000: the server answered the requests it read");
		cmp_ok(
			delta($t0, $t1, 'rekeys_sent'),
			'<=',
			delta($t0, $t1, 'rekeys_received'),
			"$flood 1000: ... one answer per request at most");
	}
	note "$flood: totals delta rekeys_received="
	  . delta($t0, $t1, 'rekeys_received')
	  . ' rekeys_sent='
	  . delta($t0, $t1, 'rekeys_sent')
	  . ' records_received='
	  . delta($t0, $t1, 'records_received');
	server_ok($flood);
}

# ---------------------------------------------------------------------
# 2b. a backlog: the run is already queued when the server reads
# ---------------------------------------------------------------------
{
	# the peer's query waits for this lock, so the server does not read
	# while the peer queues its KeyUpdates
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('SELECT pg_advisory_lock(4242)');
	my $t0 = totals_row($node);
	my $pos = log_position($node);
	my $r = run_peer(
		args => [ 'keyupdate-backlog', 20000 ],
		holds => {
			flooded =>
			  sub { $locker->query_safe('SELECT pg_advisory_unlock(4242)') }
		});
	$locker->quit;
	my $queued = $r->{key_updates_queued} // 0;
	cmp_ok($queued, '>', 1000,
		'backlog: more than 1000 KeyUpdates in a row queued before the server read'
	);
	isnt($r->{query_result}, 'ok', 'backlog: the connection was ended');
	ok(wait_backends_gone($node, $r->{pid}), 'backlog: backend exited');
	like(
		log_since($node, $pos),
		qr/terminated connection of pid $r->{pid}: the client sent 33 key updates unasked/,
		'backlog: ended for max_peer_key_updates');
	my $t1 = totals_row($node);
	my $processed = delta($t0, $t1, 'rekeys_received');
	note
	  "backlog: $queued KeyUpdates queued, the server processed $processed";
	cmp_ok($processed, '<=', 2 * 32,
		'backlog: the server stops processing the run at the bound (at most 2 x 32 of the queued KeyUpdates processed)'
	);
	is(delta($t0, $t1, 'terminations'), 1, 'backlog: terminations grew by 1');
}

# ---------------------------------------------------------------------
# 3. 20 in a row: under the bound
# ---------------------------------------------------------------------
{
	my $t0 = totals_row($node);
	my $row;
	my $r = run_peer(
		args => [ 'keyupdate-flood', 20 ],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{key_updates_sent}, 20, '20 in a row: all sent');
	is($r->{query_result}, 'ok', '20 in a row: the query is answered');
	is($r->{query_row}, '1', '20 in a row: ... with 1');
	is($r->{result}, 'ok', '20 in a row: session ended normally');
	ok($row, '20 in a row: activity row of the held session');
	is($row && $row->{rekeys_received},
		20, '20 in a row: activity row rekeys_received = 20');
	is($row && $row->{rekeys_sent},
		0, '20 in a row: the server did not rotate its own key');
	ok(wait_backends_gone($node, $r->{pid}), '20 in a row: backend exited');
	is(delta($t0, totals_row($node), 'terminations'),
		0, '20 in a row: no termination');
}

# ---------------------------------------------------------------------
# 4. a budget, not a run
# ---------------------------------------------------------------------
{
	# a KeyUpdate before each byte of a query: never two in a row
	my $t0 = totals_row($node);
	my $pos = log_position($node);
	my $r = run_peer(args => [ 'keyupdate-interleaved', 5000 ]);
	isnt($r->{query_result}, 'ok',
		'interleaved 5000: the query is not answered');
	like($r->{result}, qr/^(closed|tls_error)$/,
		'interleaved 5000: the client sees its connection closed');
	ok( wait_backends_gone($node, $r->{pid}),
		'interleaved 5000: backend exited');
	like(
		log_since($node, $pos),
		qr/terminated connection of pid $r->{pid}: the client sent \d+ key updates unasked, faster than ssl_renegotiate\.max_peer_key_updates \(32\) allows/,
		'interleaved 5000: server log says why');
	my $t1 = totals_row($node);
	is(delta($t0, $t1, 'terminations'),
		1, 'interleaved 5000: totals.terminations grew by 1');
	my $processed = delta($t0, $t1, 'rekeys_received');
	note
	  "interleaved: the client sent $r->{key_updates_sent} KeyUpdates, the server processed $processed";
	cmp_ok($processed, '>', 32,
		'interleaved 5000: the burst of 32 was allowed');
	cmp_ok($processed, '<=', 40,
		'interleaved 5000: ended at the budget (1-byte records earn almost nothing)'
	);
}
{
	my $t0 = totals_row($node);
	my $row;
	my $r = run_peer(
		args => [ 'keyupdate-spaced', 30 ],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{key_updates_sent}, 30, 'spaced 30: all KeyUpdates sent');
	is($r->{queries_answered}, 30, 'spaced 30: every query answered');
	is($r->{result}, 'ok', 'spaced 30: not ended');
	is($row && $row->{rekeys_received},
		30, 'spaced 30: activity row rekeys_received = 30');
	ok(wait_backends_gone($node, $r->{pid}), 'spaced 30: backend exited');
	is(delta($t0, totals_row($node), 'terminations'),
		0, 'spaced 30: no termination');
}
{
	# a client rotating every 64 kB, as a careful TLS 1.3 client might
	$node->safe_psql('postgres', 'CREATE TABLE hp_every (x text)');
	my $t0 = totals_row($node);
	my $row;
	my $r = run_peer(
		args =>
		  [ '--table', 'hp_every', '--every-kb', 64, 'copy-keyupdates', 20 ],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{copy_tag}, 'COPY 2560', 'every 64 kB: the 20 MB COPY completes');
	is($r->{result}, 'ok', 'every 64 kB: not ended');
	cmp_ok($r->{key_updates_sent},
		'>=', 300, 'every 64 kB: the client rotated more than 300 times');
	is( $row && $row->{rekeys_received},
		$r->{key_updates_sent},
		'every 64 kB: the server counted each of its rotations');
	ok(wait_backends_gone($node, $r->{pid}), 'every 64 kB: backend exited');
	is(delta($t0, totals_row($node), 'terminations'),
		0, 'every 64 kB: no termination');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM hp_every'),
		'2560', 'every 64 kB: every row stored');
	$node->safe_psql('postgres', 'DROP TABLE hp_every');
}

# ---------------------------------------------------------------------
# 5. bound off
# ---------------------------------------------------------------------
{
	set_conf(max_peer_key_updates => [ 0, '0' ]);
	my $t0 = totals_row($node);
	my $row;
	my $r = run_peer(
		args => [ 'keyupdate-flood', 1000 ],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{key_updates_sent}, 1000, 'bound off: 1000 in a row sent');
	is($r->{query_result}, 'ok', 'bound off: the query is answered');
	is($r->{result}, 'ok', 'bound off: not ended');
	is($row && $row->{rekeys_received},
		1000, 'bound off: activity row rekeys_received = 1000');
	ok(wait_backends_gone($node, $r->{pid}), 'bound off: backend exited');
	is(delta($t0, totals_row($node), 'terminations'),
		0, 'bound off: no termination');

	# the same flood before authentication: counted like any other
	undef $row;
	$r = run_peer(
		args => [ '--preauth-key-updates', 1000, 'keyupdate-flood', 0 ],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{result}, 'ok', 'bound off, pre-auth flood: not ended');
	cmp_ok($row ? $row->{records_received} : 0,
		'>', 1000, 'bound off, pre-auth flood: its records were counted');
	is( $row && $row->{rekeys_received},
		1000,
		'bound off, pre-auth flood: activity row rekeys_received = 1000 (rotations before authentication count too)'
	);
	note 'bound off, pre-auth flood: activity row '
	  . join(' ',
		map { "$_=" . ($row->{$_} // 'NULL') }
		  qw(records_received rekeys_received records_received_since_rekey received_since_rekey)
	  ) if $row;
	ok( wait_backends_gone($node, $r->{pid}),
		'bound off, pre-auth flood: backend exited');
	set_conf(max_peer_key_updates => [ undef, '32' ]);
}

# ---------------------------------------------------------------------
# 6. a flood before authentication
# ---------------------------------------------------------------------
{
	my $t0 = totals_row($node);
	my $log_offset = -s $node->logfile;
	my $r = run_peer(
		args => [ '--preauth-key-updates', 1000, 'keyupdate-flood', 0 ]);
	# the server stops reading once the bound is crossed, so the client
	# may not get all 1000 out
	cmp_ok($r->{preauth_key_updates_sent}, '>', 32,
		'pre-auth flood: more KeyUpdates than the bound sent before the StartupMessage'
	);
	isnt($r->{result}, 'ok',
		'pre-auth flood: 1000 in a row before authentication end the connection too'
	);
	# the client never learns the pid (no BackendKeyData before
	# authentication): wait for the backend's exit to reach the totals
	my $t1;
	for (my $i = 0; $i < 100; $i++)
	{
		$t1 = totals_row($node);
		last if delta($t0, $t1, 'terminations') > 0;
		usleep(100_000);
	}
	note 'pre-auth flood: totals delta rekeys_received='
	  . delta($t0, $t1, 'rekeys_received')
	  . ' records_received='
	  . delta($t0, $t1, 'records_received')
	  . ' terminations='
	  . delta($t0, $t1, 'terminations');
	is(delta($t0, $t1, 'terminations'),
		1, 'pre-auth flood: counted in totals.terminations');
	is( delta($t0, $t1, 'rekeys_received'),
		33,
		'pre-auth flood: processing stopped at the bound (33 rotations counted)'
	);
	ok( $node->wait_for_log(
			qr/terminated connection of pid \d+: the client sent 33 key updates unasked/,
			$log_offset),
		'pre-auth flood: the reason is logged');
	server_ok('pre-auth flood');
}

# ---------------------------------------------------------------------
# 7. never-answer: a peer that never rotates its key
# ---------------------------------------------------------------------
{
	set_conf(
		byte_limit => [ '64kB', '64kB' ],
		hard_limit => [ '65MB', '65MB' ]);

	my $bystander =
	  background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	my $bpid = $bystander->query_safe('SELECT pg_backend_pid()');

	my $t0 = totals_row($node);
	my $pos = log_position($node);
	my $r = run_peer(args => [ '--table', 'hp_copy', 'never-answer', 80 ]);
	my $pid = $r->{pid};
	is($r->{copy_started}, 1, 'never-answer, hard_limit 65MB: COPY started');
	isnt($r->{copy_result}, 'ok',
		'never-answer, hard_limit 65MB: the client could not finish the COPY'
	);
	like(
		$r->{result},
		qr/^(closed|tls_error|fatal)$/,
		'never-answer, hard_limit 65MB: the connection was ended');
	ok(wait_backends_gone($node, $pid),
		'never-answer, hard_limit 65MB: backend exited');

	my $log = log_since($node, $pos);
	ok( $log =~
		  /\[$pid\] .*FATAL:  terminating connection because more than ssl_renegotiate\.hard_limit was received under one TLS key\n.*DETAIL:  (\d+) bytes under one key; ssl_renegotiate\.hard_limit is 65MB\./,
		'never-answer, hard_limit 65MB: the FATAL names hard_limit');
	my $bytes = $1 // 0;
	cmp_ok($bytes, '>', 65 * $MB,
		'never-answer, hard_limit 65MB: ... with more than 65 MB under the key'
	);
	note "never-answer: ended after $bytes bytes under one key; client wrote "
	  . ($r->{copy_bytes_sent} // '?')
	  . ' bytes of CopyData before its writes failed';

	my $t1 = totals_row($node);
	is(delta($t0, $t1, 'terminations'),
		1, 'never-answer, hard_limit 65MB: terminations grew by 1');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM hp_copy'),
		'0', 'never-answer, hard_limit 65MB: no row of the COPY committed');
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'COPY hp_copy%'"
		),
		'0',
		'never-answer, hard_limit 65MB: no COPY left running');

	is($bystander->query_safe('SELECT 7'),
		'7', 'never-answer: the bystander session still works');
	my $brow = activity_row($node, $bpid);
	ok($brow, 'never-answer: the bystander still has its activity row');
	$bystander->quit;
	server_ok('never-answer');

	# 8. the same peer, but it stops inside a CopyData message right after
	# crossing hard_limit: the server then waits for the rest of it
	$t0 = totals_row($node);
	$pos = log_position($node);
	my ($decided, $ended, $state) = (0, 0, '');
	$r = run_peer(
		args => [ '--table', 'hp_copy', 'stall-after', 66560 ],
		holds => {
			stalled => sub {
				my $spid = $_[0]->{pid};
				# the extension has decided to end it (it happens as the
				# server reads what the peer sent; the deadline only bounds
				# the test's runtime if it never happens) ...
				my $deadline = time() + 60;
				while (1)
				{
					$decided =
					  delta($t0, totals_row($node), 'terminations') >= 1;
					last if $decided || time() > $deadline;
					usleep(100_000);
				}
				# ... so it must go away (see the header about this wait)
				$deadline = time() + 15;
				while (1)
				{
					$state = $node->safe_psql('postgres',
						"SELECT state || ', wait_event ' || coalesce(wait_event, '-') || ', xid ' || coalesce(backend_xid::text, '-') FROM pg_stat_activity WHERE pid = $spid"
					);
					$ended = $state eq '';
					last if $ended || time() > $deadline;
					usleep(200_000);
				}
				if (!$ended)
				{
					my $k = kernel_socket_info($node, $spid);
					$state .=
					  ', socket Recv-Q ' . ($k ? $k->{recv_q} : 'none');
				}
			}
		});
	my $spid = $r->{pid};
	is($r->{stalled}, 1,
		'stall after hard_limit: the client crossed 65 MB inside a CopyData message and stopped'
	);
	ok($decided,
		'stall after hard_limit: the server decided to end it (terminations grew)'
	);
	ok($ended,
		'stall after hard_limit: the backend ended while the peer stayed silent'
	  )
	  or
	  diag("15 s after the decision, backend $spid is still there: $state");
	is($r->{result}, 'fatal',
		'stall after hard_limit: after the stall, the client reads the FATAL'
	);
	like(
		$r->{server_error} // '',
		qr/terminating connection because more than ssl_renegotiate\.hard_limit was received under one TLS key/,
		'stall after hard_limit: ... which says why');
	ok(wait_backends_gone($node, $spid),
		'stall after hard_limit: backend gone after the client left');
	like(
		log_since($node, $pos),
		qr/\[$spid\] .*FATAL:  terminating connection because more than ssl_renegotiate\.hard_limit was received under one TLS key/,
		'stall after hard_limit: the FATAL names hard_limit');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM hp_copy'),
		'0', 'stall after hard_limit: no row committed');

	# the comparison: no hard limit, the same peer completes its COPY
	set_conf(hard_limit => [ undef, '0' ]);
	$t0 = totals_row($node);
	my $row;
	$r = run_peer(
		args => [ '--table', 'hp_copy', 'never-answer', 20 ],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{result}, 'ok', 'never-answer, hard_limit 0: COPY completes');
	is($r->{copy_rows_sent}, 2560,
		'never-answer, hard_limit 0: 2560 rows of 8 kB sent');
	is($r->{copy_tag}, 'COPY 2560',
		'never-answer, hard_limit 0: server reports COPY 2560');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM hp_copy'),
		'2560', 'never-answer, hard_limit 0: every row committed');
	ok($row, 'never-answer, hard_limit 0: activity row after the COPY');
	cmp_ok(
		$row ? $row->{max_received_per_key} : 0,
		'>=',
		19 * $MB,
		'never-answer, hard_limit 0: one client key carried >= 19 MB (it never rotated)'
	);
	cmp_ok($row ? $row->{rekeys_received} : 99, '<=', 1,
		'never-answer, hard_limit 0: at most one client rotation (its late answer after reading)'
	);
	note 'never-answer, hard_limit 0: '
	  . join(' ',
		map { "$_=" . ($row->{$_} // 'NULL') }
		  qw(bytes_received received_since_rekey max_received_per_key rekeys_received rekeys_sent rekey_pending)
	  ) if $row;
	ok( wait_backends_gone($node, $r->{pid}),
		'never-answer, hard_limit 0: backend exited');
	is(delta($t0, totals_row($node), 'terminations'),
		0, 'never-answer, hard_limit 0: no termination');
	$node->safe_psql('postgres', 'TRUNCATE hp_copy');
	set_conf(byte_limit => [ undef, '512MB' ]);
}

# ---------------------------------------------------------------------
# 9. TLS 1.2 client-initiated renegotiation, under each policy
# ---------------------------------------------------------------------
for my $policy (qw(renegotiate warn terminate))
{
	set_conf(tls12 => [ $policy, $policy ]);
	my $t0 = totals_row($node);
	my $pos = log_position($node);
	my $row;
	my $r = run_peer(
		args => [ '--tls', '1.2', 'renegotiate' ],
		holds => {
			renegotiation_sent => sub {
				my $pid = $_[0]->{pid};
				for (1 .. 300)
				{
					$row = activity_row($node, $pid);
					last if $row && $row->{renegotiations_refused} >= 1;
					usleep(100_000);
				}
			}
		});
	my $pid = $r->{pid};
	is($r->{tls_version}, 'TLSv1.2', "tls12=$policy: client on TLS 1.2");
	is($r->{renegotiation_request},
		'sent', "tls12=$policy: client sent a renegotiation ClientHello");
	ok($row, "tls12=$policy: activity row while the client waits");
	is($row && $row->{renegotiations_refused},
		1, "tls12=$policy: renegotiations_refused = 1 while connected");
	is($row && $row->{rekeys_received} + $row->{rekeys_sent},
		0, "tls12=$policy: no key changed");
	unlike($r->{renegotiation} // '',
		qr/^(completed|pending)/,
		"tls12=$policy: the renegotiation did not happen");
	note "tls12=$policy: renegotiation="
	  . ($r->{renegotiation} // '?')
	  . ", query after it: "
	  . ($r->{query_result} // '?')
	  . ", io errors: $r->{io_error}";
	ok(wait_backends_gone($node, $pid), "tls12=$policy: backend gone");
	my $t1 = totals_row($node);
	is(delta($t0, $t1, 'renegotiations_refused'),
		1, "tls12=$policy: totals.renegotiations_refused grew by 1");
	is(delta($t0, $t1, 'terminations'),
		0, "tls12=$policy: not counted as a termination");
	unlike(
		log_since($node, $pos),
		qr/terminated by signal|server process/,
		"tls12=$policy: no crash");
	is( $node->safe_psql(
			'postgres',
			'SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
			connstr => tls_connstr($node, tls => '1.2')),
		'TLSv1.2',
		"tls12=$policy: another TLS 1.2 session works");
}

# ---------------------------------------------------------------------
# 10. a TLS 1.2 client that refuses renegotiation, at a 64 kB limit
# ---------------------------------------------------------------------
{
	set_conf(
		byte_limit => [ '64kB', '64kB' ],
		tls12 => [ 'renegotiate', 'renegotiate' ]);
	my $t0 = totals_row($node);
	my $pos = log_position($node);
	my $r =
	  run_peer(args => [ '--tls', '1.2', 'refuse-renegotiation', 300000 ]);
	isnt($r->{query_result}, 'ok',
		'refusing client, tls12=renegotiate: not answered in full');
	like(
		$r->{result},
		qr/^(closed|tls_error|fatal)$/,
		'refusing client, tls12=renegotiate: connection ended');
	note 'refusing client, tls12=renegotiate: received '
	  . ($r->{query_app_bytes_read} // '?')
	  . ' bytes of the answer; io errors: '
	  . $r->{io_error};
	ok(wait_backends_gone($node, $r->{pid}),
		'refusing client, tls12=renegotiate: backend gone');
	like(
		log_since($node, $pos),
		qr/client refused TLS renegotiation/,
		'refusing client, tls12=renegotiate: log says the client refused');
	like(
		log_since($node, $pos),
		qr/DETAIL:  .*the client \(user "postgres", application "hostile_peer"\) answered with a no_renegotiation alert\.\n.*HINT:  This client cannot renegotiate\. Exempt its role with ALTER ROLE postgres SET ssl_renegotiate\.tls12 = 'warn', or have it use TLS 1\.3\./,
		'refusing client, tls12=renegotiate: the log names the client and the per-role exemption'
	);
	my $t1 = totals_row($node);
	is(delta($t0, $t1, 'rekey_failures'),
		1, 'refusing client, tls12=renegotiate: rekey_failures grew by 1');

	set_conf(tls12 => [ 'warn', 'warn' ]);
	$t0 = totals_row($node);
	my $row;
	$r = run_peer(
		args => [ '--tls', '1.2', 'refuse-renegotiation', 300000 ],
		holds => { end => sub { $row = activity_row($node, $_[0]->{pid}) } });
	is($r->{query_result}, 'ok', 'refusing client, tls12=warn: answered');
	is($r->{query_datarow_bytes},
		300000, 'refusing client, tls12=warn: the whole 300 kB row');
	is($row && $row->{rekeys_skipped},
		1, 'refusing client, tls12=warn: rekeys_skipped = 1');
	ok( wait_backends_gone($node, $r->{pid}),
		'refusing client, tls12=warn: backend gone');
	set_conf(byte_limit => [ undef, '512MB' ], tls12 => [ undef, 'warn' ]);
}

# ---------------------------------------------------------------------
# 11. the server survived all of it
# ---------------------------------------------------------------------
my $log = slurp_file($node->logfile);
unlike(
	$log,
	qr/terminated by signal|server process \(PID|terminating any other active server processes|PANIC:|TRAP:/,
	'whole log: no crash, no PANIC, no assertion failure');
is(totals_row($node)->{stats_reset},
	$stats_reset0, 'totals never reset by a crash restart');
ok(kill(0, $node->{_pid}), 'postmaster still running');
server_ok('end');

$node->stop;
done_testing();
