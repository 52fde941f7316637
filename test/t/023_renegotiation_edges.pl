
# TLS 1.2 renegotiation at its edges, with ssl_renegotiate.tls12 =
# renegotiate and limit = 64kB.
#
# What this proves:
#
#  1. A renegotiation may change the cipher: a client connected with
#     ECDHE-RSA-CHACHA20-POLY1305 that answers our renegotiation offering
#     only ECDHE-RSA-AES128-GCM-SHA256 gets the GCM cipher, and from then on
#     the activity view shows that cipher, the server logs the change with
#     the GCM record limit now in force, and pg_stat_ssl still shows the
#     first cipher (PostgreSQL's own cache, as the README says).
#  2. A stale error left in OpenSSL's error queue by other code (sslinfo's
#     ssl_client_dn_field with an unknown field name, its ERROR caught in
#     PL/pgSQL) does not make the server take a healthy renegotiation for a
#     failed one: the session renegotiates, gets its answer, and goes on.
#  3. A client that does not answer a HelloRequest (it reads nothing for a
#     while, which to the server is the same as ignoring it; RFC 5246
#     7.4.1.1 allows that) costs one bounded wait of 10 s per attempt: the
#     attempt counts as a failure (rekey_failures = 1, logged), the rest
#     of the answer goes out without another wait, every byte arrives, and
#     when the client does answer, late, the renegotiation completes and
#     the session goes on.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $peer = build_hostile_peer();

my $certs = make_certs();
my $client = make_client_cert($certs, 'postgres');
my $node = new_tls_node(
	'reneg_edges',
	certs => $certs,
	conf => "ssl_renegotiate.byte_limit = 64kB\n"
	  . "ssl_renegotiate.tls12 = renegotiate\n");
$node->start;
$node->safe_psql('postgres',
	'CREATE EXTENSION ssl_renegotiate; CREATE EXTENSION sslinfo');

# ---------------------------------------------------------------------
# 1. the cipher changes in a renegotiation
# ---------------------------------------------------------------------
{
	my $pos = log_position($node);
	my ($row, $ssl);
	my $r = run_hostile_peer(
		$peer, $node,
		args => [
			'--tls', '1.2',
			'--cipher', 'ECDHE-RSA-CHACHA20-POLY1305',
			'--next-cipher', 'ECDHE-RSA-AES128-GCM-SHA256',
			'read-large', 300000
		],
		holds => {
			end => sub {
				my $pid = $_[0]->{pid};
				$row = activity_row($node, $pid);
				$ssl = $node->safe_psql('postgres',
					"SELECT cipher FROM pg_stat_ssl WHERE pid = $pid");
			}
		});
	is($r->{cipher}, 'ECDHE-RSA-CHACHA20-POLY1305',
		'cipher change: connected with ChaCha20');
	is($r->{query_result}, 'ok', 'cipher change: the 300 kB answer arrived');
	cmp_ok($r->{renegotiations_completed},
		'>=', 1, 'cipher change: the client renegotiated');
	is($r->{cipher_after}, 'ECDHE-RSA-AES128-GCM-SHA256',
		'cipher change: the client now uses AES-GCM');
	is($row && $row->{cipher},
		'ECDHE-RSA-AES128-GCM-SHA256',
		'cipher change: the activity view shows the cipher in force');
	cmp_ok($row ? $row->{rekeys_sent} : 0,
		'>=', 1, 'cipher change: the renegotiation was counted');
	is($ssl, 'ECDHE-RSA-CHACHA20-POLY1305',
		'cipher change: pg_stat_ssl keeps the first cipher (PostgreSQL caches it)'
	);
	is($row && $row->{renegotiations_deferred},
		0,
		'cipher change: no renegotiation deferred (nothing was pipelined)');
	like(
		log_since($node, $pos),
		qr/changed the cipher from ECDHE-RSA-CHACHA20-POLY1305 to ECDHE-RSA-AES128-GCM-SHA256\n.*DETAIL:  The new cipher's confidentiality limit applies: a new key every 16777216 records at most\./,
		'cipher change: logged, with the GCM record limit now in force');
}

# ---------------------------------------------------------------------
# 2. a stale error in OpenSSL's queue
# ---------------------------------------------------------------------
{
	# sslinfo's field lookup leaves OpenSSL's error in the queue when the
	# name is unknown; the function catches the ERROR, the queue keeps it
	$node->safe_psql(
		'postgres', q{
		CREATE FUNCTION regress_leave_openssl_error() RETURNS int
		LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM ssl_client_dn_field('bogus');
			RETURN 0;
		EXCEPTION WHEN invalid_parameter_value THEN
			RETURN 1;
		END $$});
	my $pos = log_position($node);
	my ($waiting, $row);

	# A 100 kB query: past the 64 kB limit the server starts a
	# renegotiation from its inbound path, and the HelloRequest goes out as
	# it reads the rest.  The client then reads nothing for a moment, so the
	# server's first answer finds the renegotiation in flight and waits for
	# the client's handshake: the one place where it asks SSL_get_error
	# about a call that does not clear the queue itself.
	my $r = run_hostile_peer(
		$peer, $node,
		args => [
			'--tls', '1.2',
			'--cert', $client->{crt},
			'--key', $client->{key},
			'--query', 'SELECT regress_leave_openssl_error()',
			'hold-before-reading', 100000
		],
		holds => {
			query_sent => sub {
				my $pid = $_[0]->{pid};
				$waiting = $node->poll_query_until('postgres',
					"SELECT coalesce((SELECT lower(wait_event) = 'sslopenserver' FROM pg_stat_activity WHERE pid = $pid), true)"
				);
			},
			end => sub { $row = activity_row($node, $_[0]->{pid}) }
		});
	ok($waiting,
		'stale error: the server waited for the client\'s handshake');
	is($r->{held_result}, 'ok', 'stale error: the query was answered');
	is($r->{held_row}, '1',
		'stale error: ... after the function caught its ERROR');
	is($r->{query_result}, 'ok', 'stale error: the session goes on');
	cmp_ok($r->{renegotiations_completed},
		'>=', 1, 'stale error: the client renegotiated');
	cmp_ok($row ? $row->{rekeys_sent} : 0,
		'>=', 1, 'stale error: the server counted the renegotiation');
	is($row && $row->{rekey_failures}, 0, 'stale error: no failure counted');
	unlike(
		log_since($node, $pos),
		qr/TLS renegotiation failed/,
		'stale error: not taken for a failed renegotiation');
}

# ---------------------------------------------------------------------
# 3. a client that does not answer the HelloRequest
# ---------------------------------------------------------------------
{
	my $ROWS = 40;
	my $pos = log_position($node);
	my ($during, $waited);
	my $r = run_hostile_peer(
		$peer, $node,
		args => [ '--tls', '1.2', 'late-reader', $ROWS ],
		holds => {
			query_sent => sub {
				my $pid = $_[0]->{pid};

				# one wait of 10 s, then the attempt has failed; before
				# the fix the server waited 10 s at every message instead
				for (my $i = 0; $i < 300; $i++)
				{
					$during = activity_row($node, $pid);
					last if $during && $during->{rekey_failures} > 0;
					usleep(100_000);
				}
				# SSLOpenServer before PostgreSQL 17, SslOpenServer since
				$waited = $node->safe_psql('postgres',
					"SELECT lower(wait_event) FROM pg_stat_activity WHERE pid = $pid"
				);
			},
			end => sub {
				$_[0]->{row} = activity_row($node, $_[0]->{pid});
			}
		});
	is($during && $during->{rekey_failures},
		1, 'unanswered: the attempt counts as one failure');
	cmp_ok($during ? $during->{rekey_time} : 0,
		'>=', 9000, 'unanswered: after one wait of about 10 s');
	isnt($waited, 'sslopenserver',
		'unanswered: the server no longer waits for the handshake');
	like(
		log_since($node, $pos),
		qr/client of pid \d+ did not answer the TLS renegotiation request within 10000 ms; the connection goes on under its current keys/,
		'unanswered: logged');

	is($r->{late_result}, 'ok', 'unanswered: the query completed');
	is( $r->{late_datarow_bytes},
		$ROWS * 70000,
		'unanswered: every byte of the answer arrived');
	is($r->{query_result}, 'ok', 'unanswered: the session goes on');
	cmp_ok($r->{renegotiations_completed},
		'>=', 1, 'unanswered: the late answer completed the renegotiation');

	my $row = activity_row($node, $r->{pid});
	ok(!defined $row, 'unanswered: the backend exited');
}

# ---------------------------------------------------------------------
# 4. a pipelined query: the renegotiation waits behind it, and says so
# ---------------------------------------------------------------------
{
	my $row;
	my $r = run_hostile_peer(
		$peer, $node,
		args => [ '--tls', '1.2', 'read-large-pipelined', 300000 ],
		holds => {
			end => sub { $row = activity_row($node, $_[0]->{pid}); }
		});
	is($r->{query_result}, 'ok', 'pipelined: the large answer arrived');
	is($r->{query_datarow_bytes}, 300000, 'pipelined: every byte of it');
	is($r->{second_result} . ' ' . $r->{second_row},
		'ok 1', 'pipelined: the query behind it was answered');
	is($row && $row->{renegotiations_deferred},
		1, 'pipelined: one renegotiation deferred, counted once');
	cmp_ok($row ? $row->{rekeys_sent} : 0,
		'>=', 1, 'pipelined: it completed later, in the server\'s reads');
	is($row && $row->{rekey_failures}, 0, 'pipelined: no failure');
}

my $log = slurp_file($node->logfile);
unlike(
	$log,
	qr/terminated by signal|server process .* was terminated/,
	'no backend crashed');

done_testing();
