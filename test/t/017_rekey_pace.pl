
# The pace of rotations (ssl_renegotiate.min_rekey_gap, and at most 8
# KeyUpdates of the server's in a row), with the real defaults: this node
# leaves debug_min_rekey_gap at -1, where SslrTest's nodes set it to 0.
#
#  a. psql over TLS 1.3, byte_limit = 16kB: a 64 MB COPY TO and a 64 MB
#     COPY FROM.  Each way the key rotates at most elapsed / gap + 2 times
#     (a bound, not a timing goal), the data are intact and the session
#     lives on; again at min_rekey_gap = 250ms.
#  b. ssl_renegotiate_rekey twice in quick succession: the second waits for
#     the gap.
#  c. During a COPY FROM whose client answers every request at once (the
#     hostile peer, debug_min_rekey_gap = 0 so that requests are due all the
#     time), the server sends at most 8 KeyUpdates in a row; once it sent
#     data again (the COPY's CommandComplete), the client's key rotates
#     again.
#  d. A client that dies during COPY FROM soon after the server's
#     KeyUpdates: the server logs their pace at exit.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use SslrTest;

my $ROWS = 64 * 1024;    # lines of about 1 kB: 64 MB
my $FILLER = 990;

my $node = new_tls_node(
	'pace',
	real_pace => 1,
	conf => "ssl_renegotiate.byte_limit = 16kB\n"
	  . "ssl_renegotiate.log_rekeys = on\n"
	  . "max_wal_size = 1GB\n");
$node->start;
$node->safe_psql('postgres',
		'CREATE EXTENSION ssl_renegotiate; '
	  . 'CREATE UNLOGGED TABLE dst (i int, s text); CREATE TABLE ca (x text)'
);
is($node->safe_psql('postgres', 'SHOW ssl_renegotiate.min_rekey_gap'),
	'1s', 'the default gap is 1s');

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $connstr = tls_connstr($node, tls => '1.3');
my $gen =
  "SELECT i, md5(i::text) || repeat('x', $FILLER) FROM generate_series(1, $ROWS) i";
my $want_md5 = series_copy_md5($node, $ROWS, $FILLER);

sub set_system
{
	my ($setting, $value) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET $setting = '$value'; SELECT pg_reload_conf()");
}

# One session: COPY TO, then COPY FROM of what it received; the rotations
# each way against the bound.
sub copy_both_ways
{
	my ($gap_s, $what) = @_;
	my $file = "$tmp/data_$what.txt";
	my $s = background_tls_psql($node, $connstr);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	is( $s->query_safe('SHOW ssl_renegotiate.min_rekey_gap'),
		$gap_s == 1 ? '1s' : ($gap_s * 1000) . 'ms',
		"$what: the session has the gap");
	ok(wait_idle($node, $pid), "$what: idle before COPY TO");
	my $r0 = activity_row($node, $pid);

	my $t0 = time;
	$s->query_safe("\\copy ($gen) to '$file'");
	my $elapsed_to = time - $t0;
	ok(wait_idle($node, $pid), "$what: idle after COPY TO");
	my $r1 = activity_row($node, $pid);
	is(file_md5($file), $want_md5, "$what: COPY TO data intact");

	$node->safe_psql('postgres', 'TRUNCATE dst');
	$t0 = time;
	$s->query_safe("\\copy dst from '$file'");
	my $elapsed_from = time - $t0;
	ok(wait_idle($node, $pid), "$what: idle after COPY FROM");
	my $r2 = activity_row($node, $pid);
	is( table_copy_md5($node, 'dst'),
		"$ROWS $want_md5",
		"$what: COPY FROM data intact");

	my $sent_to = $r1->{rekeys_sent} - $r0->{rekeys_sent};
	my $sent_from = $r2->{rekeys_sent} - $r1->{rekeys_sent};
	my $recv_from = $r2->{rekeys_received} - $r1->{rekeys_received};
	note sprintf(
		"%s: COPY TO %.2f s, %d server keys (%.2f/s, max %d bytes per key); "
		  . "COPY FROM %.2f s, %d client keys, %d server keys (%.2f/s, max %d bytes per key)",
		$what, $elapsed_to,
		$sent_to, $sent_to / $elapsed_to,
		$r1->{max_sent_per_key}, $elapsed_from,
		$recv_from, $sent_from,
		$recv_from / $elapsed_from, $r2->{max_received_per_key});
	cmp_ok(
		$sent_to, '<=',
		$elapsed_to / $gap_s + 2,
		"$what: COPY TO: server keys <= elapsed / gap + 2");
	cmp_ok($sent_to, '>=', 1, "$what: COPY TO: the server's key rotated")
	  if $elapsed_to >= 2 * $gap_s;
	cmp_ok(
		$recv_from, '<=',
		$elapsed_from / $gap_s + 2,
		"$what: COPY FROM: client keys <= elapsed / gap + 2");
	# each request is a KeyUpdate of ours as well
	cmp_ok(
		$sent_from, '<=',
		$elapsed_from / $gap_s + 2,
		"$what: COPY FROM: server keys <= elapsed / gap + 2");
	is($r2->{rekey_failures}, 0, "$what: no rekey failures");
	is($s->query_safe('SELECT 1'), '1', "$what: the session lives on");
	$s->quit;
	unlink $file;
	return ($elapsed_to, $sent_to, $elapsed_from, $recv_from);
}

# ---------------------------------------------------------------------
# a. the COPYs, at 1s and at 250ms
# ---------------------------------------------------------------------
copy_both_ways(1, 'a 1s');
set_system('ssl_renegotiate.min_rekey_gap', '250ms');
copy_both_ways(0.25, 'a 250ms');
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET ssl_renegotiate.min_rekey_gap; SELECT pg_reload_conf()'
);

# ---------------------------------------------------------------------
# b. on demand, twice in quick succession (a gap of 3s, for a margin)
# ---------------------------------------------------------------------
set_system('ssl_renegotiate.min_rekey_gap', '3s');
{
	my $s = background_tls_psql($node, $connstr);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	is($s->query_safe('SHOW ssl_renegotiate.min_rekey_gap'),
		'3s', 'b: the session has the gap');
	sleep 3.2;    # its keys are older than the gap
	my $r0 = activity_row($node, $pid);
	$node->safe_psql('postgres', "SELECT ssl_renegotiate_rekey($pid)");
	my $t1 = time;
	$s->query_safe('SELECT 1');
	my $r1 = activity_row($node, $pid);
	cmp_ok($r1->{rekeys_sent}, '>', $r0->{rekeys_sent},
		'b: the first request rotated the server key at once');

	$node->safe_psql('postgres', "SELECT ssl_renegotiate_rekey($pid)");
	$s->query_safe('SELECT 1');
	my $r2 = activity_row($node, $pid);
	my $quickly = time - $t1 < 2.5;
	is($r2->{rekeys_sent}, $r1->{rekeys_sent},
		'b: the second, within the gap, waits')
	  if $quickly;
	note 'b: the second request came too late to test the wait'
	  unless $quickly;

	sleep 3.2 - (time - $t1) if time - $t1 < 3.2;
	$s->query_safe('SELECT 1');
	my $r3 = activity_row($node, $pid);
	cmp_ok($r3->{rekeys_sent}, '>', $r2->{rekeys_sent},
		'b: the second rotated once the gap had passed');
	is($s->query_safe('SELECT 1'), '1', 'b: the session lives on');
	$s->quit;
}
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET ssl_renegotiate.min_rekey_gap; SELECT pg_reload_conf()'
);

# ---------------------------------------------------------------------
# c. at most 8 KeyUpdates in a row during COPY FROM
# ---------------------------------------------------------------------
SKIP:
{
	my $peer = eval { build_hostile_peer() };
	skip "hostile peer not built: $@", 5 unless $peer;
	set_system('ssl_renegotiate.debug_min_rekey_gap', '0');
	my $r = run_hostile_peer($peer, $node,
		args => [ '--table', 'ca', 'copy-answering-then-query', 2 ]);
	is($r->{copy_result}, 'ok', 'c: the COPY FROM completed');
	is($r->{result}, 'ok', 'c: the session ended normally');
	cmp_ok($r->{key_updates_received_max_in_row} // 99,
		'<=', 8, 'c: at most 8 KeyUpdates in a row from the server');
	cmp_ok($r->{key_updates_received_max_in_row} // 0, '==', 8,
		'c: ... and the rule was what stopped it (byte_limit asked for more)'
	);
	cmp_ok($r->{key_updates_sent_after_copy} // 0,
		'>=', 1,
		"c: the client's key rotated again after the server sent data");
	$node->safe_psql('postgres',
		'ALTER SYSTEM RESET ssl_renegotiate.debug_min_rekey_gap; SELECT pg_reload_conf()'
	);
}

# ---------------------------------------------------------------------
# d. a client that dies during COPY FROM soon after our KeyUpdates: the
#    server says at exit how fast they came
# ---------------------------------------------------------------------
set_system('ssl_renegotiate.debug_min_rekey_gap', '0');
{
	my $offset = -s $node->logfile;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-d', $connstr, '-c', 'COPY dst FROM STDIN' ],
		'<',
		\$in,
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$in = join('', map { "$_\t" . ('y' x 1000) . "\n" } 1 .. 2000);
	$h->pump while length $in;
	ok( $node->poll_query_until(
			'postgres',
			'SELECT count(*) > 0 FROM ssl_renegotiate_activity '
			  . 'WHERE pid <> pg_backend_pid() AND rekeys_sent > 0'),
		'd: the server sent KeyUpdates during the COPY');
	$h->kill_kill;
	ok( $node->wait_for_log(
			qr/connection of pid \d+ was ended by the client without a close_notify [\d.]+ s after the server's last TLS KeyUpdate/,
			$offset),
		'd: the line at exit says the client ended it soon after KeyUpdates');
	like(
		slurp_file($node->logfile, $offset),
		qr/DETAIL:  The server sent \d+ KeyUpdates in the second up to its last, the last \d+ of them in a row without application data between them \(\d+ in all\)\. Known client limits: GnuTLS ends a connection at the 9th KeyUpdate within 1000 ms/,
		'd: ... with their pace and the known limits');
}
$node->safe_psql('postgres',
	'ALTER SYSTEM RESET ssl_renegotiate.debug_min_rekey_gap; SELECT pg_reload_conf()'
);

$node->stop;
done_testing();
