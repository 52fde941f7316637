
# Part 1 of ssl_renegotiate: exact, per-backend TLS accounting.
#
# What this file proves, against a server with ssl_renegotiate preloaded
# (ssl_renegotiate.byte_limit = 0, so that no key is ever rotated and only the
# accounting is exercised):
#
#  - For a TLS 1.3 and a TLS 1.2 session that \copy more than 50 MB to the
#    client and more than 50 MB from it (data verified identical by md5 on
#    both sides), the session's row in ssl_renegotiate_activity, read while
#    it is idle, equals to the byte what the kernel counted for that
#    backend's TCP socket, less the plaintext SSLRequest exchange (8 bytes
#    received, 1 byte 'S' sent).  Record counts are plausible, version and
#    cipher agree with pg_stat_ssl, and the session functions
#    (ssl_renegotiate_bytes_sent() ...) agree with the view and grow.
#  - A TCP connection without TLS has no row, its session functions return
#    NULL, and it changes no total.
#  - Walsenders are counted: a streaming standby connected over TLS has a
#    'walsender' row, matching pg_stat_replication, exact against the
#    kernel, and growing by at least the WAL it streamed; a pg_basebackup
#    over TLS adds one connection and at least the backup's size to the
#    totals' bytes_sent.
#  - Totals survive disconnect: after N sessions exit, the totals equal the
#    sum of their last idle rows exactly, plus one Terminate record each on
#    the received side; live sessions are included in the totals too.
#  - ssl_renegotiate_reset() zeroes the totals, moves stats_reset forward,
#    and a session live during the reset is only counted for what it did
#    afterwards.
#  - Visibility follows pg_stat_activity: other roles' rows show pid,
#    usesysid and backend_type only; pg_read_all_stats, the role itself and
#    its members see the values; usesysid is the session user's oid.
#  - Failed logins over TLS are counted in the totals' connections: a wrong
#    password, and a connection rejected by a pg_hba.conf "reject" line.
#
# The sections are numbered as in the issue, but run in the order 1, 3, 4,
# 2, 5-8: the base backup and the standby come before the 100 MB of tables
# of section 2 exist, which keeps them small and fast.
#
# Run as the OS user that owns a copy of the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use File::Find;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

# Plaintext Terminate message ('X' + int32 length) and the TLS 1.3 record
# that carries it with an AEAD cipher (AES-GCM and ChaCha20-Poly1305 both
# have 16-byte tags): 5 header + 5 message + 1 inner content type + 16 tag.
use constant TERMINATE_RECORD_TLS13 => 5 + 5 + 1 + 16;

# Largest record a peer may send: header + 2^14 + 256 bytes of ciphertext.
use constant MAX_RECORD => 16384 + 256 + 5;

# The counter columns of ssl_renegotiate_activity, the ones hidden from
# roles without the privileges of the backend's role.
my @hidden_cols = qw(version cipher bytes_sent bytes_received records_sent
  records_received rekeys_sent rekeys_received rekey_failures rekey_time
  last_rekey sent_since_rekey received_since_rekey max_sent_per_key
  max_received_per_key rekey_pending rekeys_skipped renegotiations_refused
  records_sent_since_rekey records_received_since_rekey);

my $t_start = time();

# ---------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------

# Wait until backend $pid is idle with a quiet socket, then return its
# activity row and the kernel's TLS counts (received, sent).
sub settled_row
{
	my ($node, $pid, $what) = @_;
	ok(wait_idle($node, $pid), "$what: backend $pid idle, socket quiet");
	my @k = settled_kernel_tls_counts($node, $pid);
	my $row = activity_row($node, $pid);
	return ($row, @k);
}

# SslrTest::kernel_tls_counts(), noting what the kernel said.
sub settled_kernel_tls_counts
{
	my ($node, $pid) = @_;
	my ($rcv, $acked, undef, $retrans) = kernel_counts($node, $pid);
	return () unless defined $rcv;
	note
	  "kernel, backend $pid: received $rcv, acked $acked, retransmitted $retrans";
	return ($rcv - SSL_REQUEST_CLIENT_BYTES,
		$acked - SSL_REQUEST_SERVER_BYTES);
}

# Compare a row with the kernel: the core assertion of this file.
sub is_exact
{
	my ($row, $krcv, $ksent, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok(defined $row, "$what: backend has a row in ssl_renegotiate_activity");
	$row //= {};
	ok(defined $krcv, "$what: kernel socket found");
	is($row->{bytes_received},
		$krcv, "$what: bytes_received == kernel bytes_received - 8");
	is($row->{bytes_sent}, $ksent,
		"$what: bytes_sent == kernel bytes_acked - 1");
	note "$what: view received="
	  . ($row->{bytes_received} // 'undef')
	  . " sent="
	  . ($row->{bytes_sent} // 'undef')
	  . " records r/s="
	  . ($row->{records_received} // 'undef') . "/"
	  . ($row->{records_sent}     // 'undef') . ";"
	  . " kernel-less-SSLRequest received="
	  . ($krcv // 'undef')
	  . " sent="
	  . ($ksent // 'undef');
	return;
}

# Poll the totals until connections differs from $before (failed logins:
# the backend folds its counts at exit, a moment after the client saw the
# error).
sub wait_totals_connections_change
{
	my ($node, $before) = @_;
	my $deadline = time() + 10;
	my $t;
	while (time() <= $deadline)
	{
		$t = totals_row($node);
		return $t if $t->{connections} != $before;
		usleep(50_000);
	}
	return $t;
}

sub dir_bytes
{
	my ($dir) = @_;
	my $sum = 0;
	find(sub { $sum += -s $_ if -f $_ }, $dir);
	return $sum;
}

# ---------------------------------------------------------------------
# 1. The node
# ---------------------------------------------------------------------

my $node = new_tls_node(
	'acct',
	allows_streaming => 1,
	conf => "ssl_renegotiate.byte_limit = 0\nmax_wal_size = '1GB'\n");

# Failed logins (section 8): lines are matched first to last, so these must
# come before new_tls_node's "hostssl all all ... trust".  Written before
# the first start, so no reload race.
{
	my $hba = $node->data_dir . '/pg_hba.conf';
	my $old = slurp_file($hba);
	unlink $hba or die "unlink $hba: $!";
	append_to_file($hba,
			"hostssl all regress_rejected 127.0.0.1/32 reject\n"
		  . "hostssl all regress_pw       127.0.0.1/32 scram-sha-256\n"
		  . $old);
}
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');
is( $node->safe_psql(
		'postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate'"
	),
	'1.3',
	'CREATE EXTENSION ssl_renegotiate over the Unix socket');
is( $node->safe_psql(
		'postgres', q{SELECT current_setting('ssl_renegotiate.byte_limit')}),
	'0',
	'ssl_renegotiate.byte_limit = 0: accounting only, no rotation');
is( $node->safe_psql(
		'postgres', 'SELECT count(*) FROM ssl_renegotiate_activity'),
	'0',
	'no TLS backend yet: the view is empty');

# ---------------------------------------------------------------------
# 3. A TCP connection without TLS: no row, NULL session functions, no
#    change in the totals
# ---------------------------------------------------------------------

{
	my $nossl = tls_connstr($node, sslmode => 'disable');
	my $t0 = totals_row($node);
	my $res = $node->safe_psql(
		'postgres', q{
		SELECT s.ssl, inet_client_addr() IS NOT NULL,
		       (SELECT count(*) FROM ssl_renegotiate_activity a
		         WHERE a.pid = pg_backend_pid()),
		       ssl_renegotiate_bytes_sent() IS NULL,
		       ssl_renegotiate_bytes_received() IS NULL,
		       ssl_renegotiate_records_sent() IS NULL,
		       ssl_renegotiate_records_received() IS NULL,
		       ssl_renegotiate_rekeys_sent() IS NULL,
		       ssl_renegotiate_rekeys_received() IS NULL
		FROM pg_stat_ssl s WHERE s.pid = pg_backend_pid()},
		connstr => $nossl);
	is($res, 'f|t|0|t|t|t|t|t|t',
		'TCP without TLS: no row in the view, session functions NULL');
	my $t1 = totals_row($node);
	is_deeply(
		[
			@$t1{
				qw(connections bytes_sent bytes_received records_sent records_received)
			}
		],
		[
			@$t0{
				qw(connections bytes_sent bytes_received records_sent records_received)
			}
		],
		'TCP without TLS: totals unchanged');

	# while such a session is live, too
	my $s =
	  $node->background_psql('postgres', extra_params => [ '-d', $nossl ]);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	is( $node->safe_psql(
			'postgres', "SELECT ssl FROM pg_stat_ssl WHERE pid = $pid"),
		'f',
		'background TCP session without TLS');
	ok( !defined activity_row($node, $pid),
		'live TCP session without TLS has no row');
	$s->quit;
}

# ---------------------------------------------------------------------
# 4. Walsenders over TLS: pg_basebackup, then a streaming standby
# ---------------------------------------------------------------------

{
	my $t0 = totals_row($node);
	my $dir = PostgreSQL::Test::Utils::tempdir('basebackup');
	my $target = "$dir/data";
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			'pg_basebackup', '-d', tls_connstr($node, tls => '1.3'),
			'-D', $target, '-X', 'fetch', '--no-sync', '-c', 'fast', '-w'
		],
		'<',
		\undef,
		'>',
		\$stdout,
		'2>',
		\$stderr);
	ok($ok, 'pg_basebackup over TLS 1.3') or diag $stderr;

	# its walsender has exited once no walsender is left
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'",
			'0'),
		'pg_basebackup walsender gone');
	my $t1 = totals_row($node);
	my $size = -d $target ? dir_bytes($target) : 0;
	note "basebackup: $size bytes of files; totals bytes_sent grew by "
	  . ($t1->{bytes_sent} - $t0->{bytes_sent});
	cmp_ok($size, '>', 10_000_000, 'backup has the usual size (> 10 MB)');
	is($t1->{connections} - $t0->{connections},
		1, 'pg_basebackup -X fetch: one TLS connection counted');
	cmp_ok($t1->{bytes_sent} - $t0->{bytes_sent},
		'>=', $size, 'totals bytes_sent grew by at least the backup size');
	cmp_ok(
		$t1->{bytes_sent} - $t0->{bytes_sent},
		'<',
		2 * $size + 1_000_000,
		'pg_basebackup: ... but not absurdly more');
	cmp_ok(
		$t1->{records_sent} - $t0->{records_sent},
		'>=',
		int($size / 16384),
		'records_sent grew accordingly');
}

{
	$node->backup('stb');
	my $standby = PostgreSQL::Test::Cluster->new('standby');
	$standby->init_from_backup($node, 'stb', has_streaming => 1);
	tls_primary_conninfo($standby, $node, tls => '1.3');
	$standby->start;
	$node->wait_for_catchup('standby');

	my $rep = query_row_hash($node,
		"SELECT pid, usesysid, sent_lsn FROM pg_stat_replication WHERE application_name = 'standby'"
	);
	ok(defined $rep, 'standby streams');
	my $wpid = $rep->{pid};
	is( $node->safe_psql(
			'postgres',
			"SELECT ssl, version FROM pg_stat_ssl WHERE pid = $wpid"),
		't|TLSv1.3',
		'the standby streams over TLS 1.3');

	my $row = activity_row($node, $wpid);
	ok(defined $row, 'walsender has a row in ssl_renegotiate_activity');
	is($row->{backend_type}, 'walsender', '... with backend_type walsender');
	is($row->{usesysid}, $rep->{usesysid},
		'... usesysid as in pg_stat_replication');
	is($row->{version}, 'TLSv1.3', '... version TLSv1.3');
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM ssl_renegotiate_activity WHERE backend_type = 'walsender'"
		),
		'1',
		'exactly one walsender row');

	# exact against the kernel: the walsender talks every few seconds
	# (status updates, keepalives), so take a sample where the kernel's
	# counts did not move around the read of the view
	my ($r, @k);
	for (my $try = 0; $try < 10; $try++)
	{
		my @k1 = settled_kernel_tls_counts($node, $wpid);
		$r = activity_row($node, $wpid);
		@k = settled_kernel_tls_counts($node, $wpid);
		last
		  if defined $r
		  && @k1
		  && @k
		  && $k1[0] == $k[0]
		  && $k1[1] == $k[1]
		  && $r->{bytes_received} == $k[0]
		  && $r->{bytes_sent} == $k[1];
		usleep(200_000);
	}
	is_exact($r, $k[0], $k[1], 'walsender');

	# write WAL: the walsender's bytes_sent grows by at least the WAL it
	# sent (XLogData messages carry the WAL verbatim).  Bytes and sent_lsn
	# are read in one query on both sides.
	my $wal_sql =
	  "SELECT a.bytes_sent, a.bytes_received, r.sent_lsn FROM ssl_renegotiate_activity a JOIN pg_stat_replication r USING (pid) WHERE pid = $wpid";
	my $w0 = query_row_hash($node, $wal_sql);
	$node->safe_psql('postgres',
		'CREATE TABLE walgen AS SELECT i, md5(i::text) FROM generate_series(1, 100000) i'
	);
	$node->wait_for_catchup('standby');
	my $w1 = query_row_hash($node, $wal_sql);
	ok(defined $w1, 'same walsender after writing WAL');
	my $streamed = $node->safe_psql('postgres',
		"SELECT pg_wal_lsn_diff('$w1->{sent_lsn}', '$w0->{sent_lsn}')::bigint"
	);
	note "walsender streamed $streamed bytes of WAL; its bytes_sent grew by "
	  . ($w1->{bytes_sent} - $w0->{bytes_sent});
	cmp_ok($streamed, '>', 5_000_000, 'several MB of WAL streamed');
	cmp_ok($w1->{bytes_sent} - $w0->{bytes_sent},
		'>=', $streamed,
		"walsender's bytes_sent grew by at least the WAL streamed");
	cmp_ok(
		$w1->{bytes_sent} - $w0->{bytes_sent},
		'<',
		2 * $streamed,
		'walsender: ... but not absurdly more');
	cmp_ok($w1->{bytes_received}, '>', $w0->{bytes_received},
		"walsender's bytes_received grew (standby feedback)");
	is($standby->safe_psql('postgres', 'SELECT count(*) FROM walgen'),
		'100000', 'standby replayed it');

	$standby->stop;
	$node->safe_psql('postgres', 'DROP TABLE walgen');
	ok(wait_backends_gone($node, $wpid),
		'walsender gone after the standby stopped');
}

# ---------------------------------------------------------------------
# 2. > 50 MB each way over TLS 1.3 and TLS 1.2, exact against the kernel
# ---------------------------------------------------------------------

my $copydir = PostgreSQL::Test::Utils::tempdir('copy');

$node->safe_psql(
	'postgres', q{
	CREATE TABLE big AS
	SELECT i AS id,
	       md5(i::text) AS a,
	       md5((i * 7)::text) || md5((-i)::text) AS b,
	       (i * 1.2345)::numeric(14, 4) AS n,
	       timestamptz '2024-01-01 00:00:00+00' + i * interval '1.234567 s' AS ts
	FROM generate_series(1, 360000) i;
	CREATE TABLE big_in (LIKE big)});

# md5 of the COPY text form of a table, ordered by id (same output functions
# as COPY, and no value here needs escaping)
sub table_md5
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT md5(string_agg(concat_ws(E'\\t', id, a, b, n, ts) || E'\\n', '' ORDER BY id)) FROM $table"
	);
}
my $big_md5 = table_md5('big');
like($big_md5, qr/^[0-9a-f]{32}$/, 'server-side md5 of the table');

for my $v ('1.3', '1.2')
{
	my $what = "TLS $v";
	my $file = "$copydir/big_$v.txt";
	$node->safe_psql('postgres', 'TRUNCATE big_in');

	my $s = background_tls_psql($node, tls_connstr($node, tls => $v));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	my $ssl = query_row_hash($node,
		"SELECT version, cipher FROM pg_stat_ssl WHERE pid = $pid");
	is($ssl->{version}, "TLSv$v", "$what: pg_stat_ssl says TLSv$v");

	# out: server -> client
	$s->query_safe("\\copy (SELECT * FROM big ORDER BY id) TO '$file'");
	my $fsize = -s $file;
	cmp_ok($fsize, '>=', 50 * 1024 * 1024, "$what: \\copy TO wrote >= 50 MB");
	is(file_md5($file), $big_md5,
		"$what: \\copy TO: client file identical to the table");
	my ($row_out, @k_out) = settled_row($node, $pid, "$what after COPY TO");
	is_exact($row_out, $k_out[0], $k_out[1], "$what after COPY TO");
	cmp_ok($row_out->{bytes_sent},
		'>', $fsize, "$what: bytes_sent > size of the data");

	# in: client -> server
	$s->query_safe("\\copy big_in FROM '$file'");
	is(table_md5('big_in'), $big_md5,
		"$what: \\copy FROM: table identical to the file");
	my ($row, @k) = settled_row($node, $pid, "$what after COPY FROM");
	is_exact($row, $k[0], $k[1], "$what after COPY FROM");
	cmp_ok($row->{bytes_received} - $row_out->{bytes_received},
		'>', $fsize, "$what: bytes_received grew by more than the data");

	# records
	for my $dir (qw(sent received))
	{
		my $bytes = $row->{"bytes_$dir"} // 0;
		my $records = $row->{"records_$dir"} // 0;
		my $per = $records > 0 ? $bytes / $records : 0;
		cmp_ok($records, '>', 0, "$what: records_$dir > 0");
		cmp_ok(
			$per, '<=',
			16384 + 256,
			"$what: bytes_$dir / records_$dir <= 16384 + 256");
		cmp_ok($per, '>=', 5, "$what: bytes_$dir / records_$dir >= 5");
		cmp_ok(
			$records, '>=',
			int($fsize / MAX_RECORD),
			"$what: records_$dir >= data / largest record");
		note sprintf("%s: %s %d bytes in %d records (%.1f per record)",
			$what, $dir, $bytes, $records, $per);
	}
	is_deeply(
		[ @$row{qw(rekeys_sent rekeys_received rekey_failures)} ],
		[ 0, 0, 0 ],
		"$what: no rekey (limit = 0)");

	# version and cipher, joined with pg_stat_ssl
	my $j = query_row_hash($node,
		"SELECT a.version AS av, s.version AS sv, a.cipher AS ac, s.cipher AS sc, a.backend_type, a.usesysid = (SELECT oid FROM pg_roles WHERE rolname = current_user) AS own FROM ssl_renegotiate_activity a JOIN pg_stat_ssl s USING (pid) WHERE pid = $pid"
	);
	is($j->{av}, "TLSv$v", "$what: view version TLSv$v");
	is($j->{av}, $j->{sv}, "$what: version as in pg_stat_ssl");
	ok(defined $j->{ac} && $j->{ac} ne '', "$what: view has a cipher");
	is($j->{ac}, $j->{sc}, "$what: cipher as in pg_stat_ssl");
	is($j->{backend_type}, 'client backend', "$what: client backend");
	ok($j->{own}, "$what: usesysid is the session user's oid");

	# session functions: the query that calls them was received before they
	# run and nothing was sent since the row above; each call's result
	# goes out after it
	my @fn = qw(bytes_sent bytes_received records_sent records_received);
	my $call = 'SELECT ' . join(', ', map { "ssl_renegotiate_$_()" } @fn);
	my %c1;
	@c1{@fn} = split /\|/, $s->query_safe($call);
	my %c2;
	@c2{@fn} = split /\|/, $s->query_safe($call);
	note
	  "$what: view before @$row{@fn}; first call @c1{@fn}; second call @c2{@fn}";
	is($c1{bytes_sent}, $row->{bytes_sent},
		"$what: first ssl_renegotiate_bytes_sent() == view (nothing sent in between)"
	);
	is($c1{records_sent}, $row->{records_sent},
		"$what: first ssl_renegotiate_records_sent() == view");
	cmp_ok(
		$c1{bytes_received}, '>',
		$row->{bytes_received},
		"$what: first ssl_renegotiate_bytes_received() > view (the query)");
	cmp_ok(
		$c1{records_received}, '>',
		$row->{records_received},
		"$what: first ssl_renegotiate_records_received() > view");

	for my $f (@fn)
	{
		cmp_ok($c2{$f}, '>', $c1{$f},
			"$what: ssl_renegotiate_$f() increases");
	}
	my ($row3, @k3) = settled_row($node, $pid, "$what after the calls");
	is_exact($row3, $k3[0], $k3[1], "$what after the calls");
	cmp_ok($row3->{bytes_sent}, '>', $c2{bytes_sent},
		"$what: view after > second call (its result was sent after)");

	$s->quit;
	unlink $file;
	ok(wait_backends_gone($node, $pid), "$what: session gone");
}
$node->safe_psql('postgres', 'DROP TABLE big, big_in');

# ---------------------------------------------------------------------
# 5. Totals: live sessions, and sessions that exited
# ---------------------------------------------------------------------

is( $node->safe_psql(
		'postgres', 'SELECT count(*) FROM ssl_renegotiate_activity'),
	'0',
	'no TLS backend left before the totals tests');

{
	my $N = 3;
	$node->safe_psql('postgres', 'SELECT ssl_renegotiate_reset()');

	my (@s, @pid, @row);
	for my $i (1 .. $N)
	{
		push @s, background_tls_psql($node, tls_connstr($node, tls => '1.3'));
		push @pid, $s[-1]->query_safe('SELECT pg_backend_pid()');
		# different amounts each way
		my $lit = 'y' x (20_000 * $i);
		$s[-1]->query_safe("SELECT length('$lit')");
		$s[-1]->query_safe(
			"\\copy (SELECT g, md5(g::text) FROM generate_series(1, 30000 * $i) g) TO '/dev/null'"
		);
	}
	my %sum;
	for my $i (0 .. $N - 1)
	{
		my ($r, @k) = settled_row($node, $pid[$i], "session $i");
		is_exact($r, $k[0], $k[1], "session $i");
		push @row, $r;
		$sum{$_} += $r->{$_}
		  for qw(bytes_sent bytes_received records_sent records_received);
	}

	# live sessions are part of the totals
	my $live = totals_row($node);
	is($live->{connections}, $N, "live: totals connections == $N");
	is($live->{$_}, $sum{$_}, "live: totals $_ == sum of the rows")
	  for qw(bytes_sent bytes_received records_sent records_received);

	# one session exits, the others still live: still the same sum, plus
	# the exited one's Terminate
	$s[0]->quit;
	ok(wait_backends_gone($node, $pid[0]), 'first session gone');
	my $mixed = totals_row($node);
	is($mixed->{connections}, $N,
		'one exited, two live: connections unchanged');
	is($mixed->{bytes_sent}, $sum{bytes_sent},
		'one exited, two live: bytes_sent == sum');
	is( $mixed->{bytes_received},
		$sum{bytes_received} + TERMINATE_RECORD_TLS13,
		'one exited, two live: bytes_received == sum + one Terminate record');
	is( $mixed->{records_received},
		$sum{records_received} + 1,
		'one exited, two live: records_received == sum + 1');

	$_->quit for @s[ 1 .. $N - 1 ];
	ok(wait_backends_gone($node, @pid), 'all sessions gone');
	is( $node->safe_psql(
			'postgres', 'SELECT count(*) FROM ssl_renegotiate_activity'),
		'0',
		'no rows left');

	# What the backends received after their last idle row is exactly the
	# client's Terminate message: psql's PQfinish() sends 'X' + int32
	# length (5 bytes) in one SSL_write, i.e. one TLS 1.3 record of
	# 5 + 5 + 1 + 16 = 27 bytes.  The backend exits on reading it and
	# never reads libpq's close_notify that follows.  What the backends
	# sent after their last idle row is their own close_notify alert, sent
	# when the socket is closed at proc exit, after the slot was folded
	# into the totals (before_shmem_exit): it is not in the totals.
	# (Seen with strace on such a backend after its last idle row:
	# recvfrom 5 bytes, recvfrom 22 bytes -- the Terminate record --, then
	# sendto 24 bytes -- close_notify: 5 + 2 + 1 + 16 --, then exit.)
	my $t = totals_row($node);
	is($t->{connections}, $N, "exited: totals connections == $N");
	is($t->{bytes_sent}, $sum{bytes_sent},
		'exited: totals bytes_sent == sum of the last rows (close_notify not counted)'
	);
	is($t->{records_sent}, $sum{records_sent},
		'exited: totals records_sent == sum of the last rows');
	is( $t->{bytes_received},
		$sum{bytes_received} + $N * TERMINATE_RECORD_TLS13,
		"exited: totals bytes_received == sum + $N Terminate records of 27 bytes"
	);
	is( $t->{records_received},
		$sum{records_received} + $N,
		"exited: totals records_received == sum + $N");
	note
	  "totals after exit: sent $t->{bytes_sent} (sum $sum{bytes_sent}), received $t->{bytes_received} (sum $sum{bytes_received})";
}

# ---------------------------------------------------------------------
# 6. Reset
# ---------------------------------------------------------------------

{
	my $before = totals_row($node);
	cmp_ok($before->{connections}, '>', 0,
		'totals not zero before the reset');
	$node->safe_psql('postgres', 'SELECT ssl_renegotiate_reset()');
	my $t = totals_row($node);
	is_deeply(
		[
			@$t{
				qw(connections bytes_sent bytes_received records_sent
				  records_received rekeys_sent rekeys_received rekey_failures
				  rekey_time rekeys_skipped renegotiations_refused terminations)
			}
		],
		[ (0) x 12 ],
		'after reset with no TLS session: every total is 0');
	is( $node->safe_psql(
			'postgres',
			"SELECT stats_reset > '$before->{stats_reset}'::timestamptz FROM ssl_renegotiate_totals"
		),
		't',
		'stats_reset moved forward');

	# only superusers may reset
	$node->safe_psql('postgres', 'CREATE ROLE regress_nobody LOGIN');
	my ($ret, $out, $err) = $node->psql(
		'postgres',
		'SELECT ssl_renegotiate_reset()',
		connstr => $node->connstr('postgres') . ' user=regress_nobody');
	like(
		$err,
		qr/permission denied for function ssl_renegotiate_reset/,
		'an ordinary role may not reset');

	# a session live during the reset: only what it does afterwards counts
	my $s = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	$s->query_safe(
		"\\copy (SELECT g FROM generate_series(1, 50000) g) TO '/dev/null'");
	my ($r0, @k0) = settled_row($node, $pid, 'before reset');
	my $t0 = totals_row($node);
	is($t0->{bytes_sent}, $r0->{bytes_sent},
		'before reset: totals = this session alone');
	$node->safe_psql('postgres', 'SELECT ssl_renegotiate_reset()');
	$t = totals_row($node);
	is_deeply(
		[
			@$t{
				qw(connections bytes_sent bytes_received records_sent records_received)
			}
		],
		[ 0, 0, 0, 0, 0 ],
		'reset with a live TLS session: totals 0 right after');
	$s->query_safe(
		"\\copy (SELECT g, md5(g::text) FROM generate_series(1, 20000) g) TO '/dev/null'"
	);
	my ($r1, @k1) = settled_row($node, $pid, 'after reset');
	is_exact($r1, $k1[0], $k1[1], 'live across reset');
	$t = totals_row($node);
	cmp_ok($r1->{bytes_sent} - $r0->{bytes_sent},
		'>', 500_000, 'the session sent more after the reset');
	is( $t->{bytes_sent},
		$r1->{bytes_sent} - $r0->{bytes_sent},
		'totals bytes_sent == what the session sent after the reset');
	is( $t->{bytes_received},
		$r1->{bytes_received} - $r0->{bytes_received},
		'totals bytes_received == what the session received after the reset');
	is( $t->{records_sent},
		$r1->{records_sent} - $r0->{records_sent},
		'totals records_sent == delta');
	is( $t->{records_received},
		$r1->{records_received} - $r0->{records_received},
		'totals records_received == delta');
	is($t->{connections}, 0,
		'a connection made before the reset is not counted after it');

	$s->quit;
	ok(wait_backends_gone($node, $pid), 'session gone');
	$t = totals_row($node);
	is( $t->{bytes_sent},
		$r1->{bytes_sent} - $r0->{bytes_sent},
		'after it exits: totals bytes_sent still == delta');
	is( $t->{bytes_received},
		$r1->{bytes_received} -
		  $r0->{bytes_received} +
		  TERMINATE_RECORD_TLS13,
		'after it exits: totals bytes_received == delta + Terminate record');
	is($t->{connections}, 0, 'after it exits: connections still 0');
}

# ---------------------------------------------------------------------
# 7. Visibility
# ---------------------------------------------------------------------

{
	$node->safe_psql(
		'postgres', q{
		CREATE ROLE regress_alice LOGIN;
		CREATE ROLE regress_bob LOGIN;
		CREATE ROLE regress_carol LOGIN;
		CREATE ROLE regress_stats LOGIN;
		GRANT regress_alice TO regress_carol;
		GRANT pg_read_all_stats TO regress_stats;});
	my $alice_oid = $node->safe_psql('postgres',
		"SELECT oid FROM pg_roles WHERE rolname = 'regress_alice'");

	my $s = background_tls_psql($node,
		tls_connstr($node, tls => '1.3', user => 'regress_alice'));
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	ok(wait_idle($node, $pid), 'alice idle');

	my $as = sub {
		my ($role) = @_;
		return query_row_hash(
			$node,
			"SELECT * FROM ssl_renegotiate_activity WHERE pid = $pid",
			connstr => $node->connstr('postgres') . " user=$role");
	};

	my $su = activity_row($node, $pid);
	is($su->{usesysid}, $alice_oid, "usesysid is regress_alice's oid");
	is( $node->safe_psql(
			'postgres',
			"SELECT usesysid FROM pg_stat_activity WHERE pid = $pid"),
		$su->{usesysid},
		'usesysid as in pg_stat_activity');

	my $bob = $as->('regress_bob');
	ok(defined $bob, "bob sees alice's row");
	is($bob->{pid}, $pid, "bob: pid");
	is($bob->{usesysid}, $alice_oid, "bob: usesysid is alice's");
	is($bob->{backend_type}, 'client backend', 'bob: backend_type');
	is_deeply([ grep { defined $bob->{$_} } @hidden_cols ],
		[], 'bob: version, cipher and every counter NULL');

	for my $role (qw(regress_stats regress_alice regress_carol))
	{
		my $r = $as->($role);
		ok(defined $r, "$role sees alice's row");
		is($r->{usesysid}, $alice_oid, "$role: usesysid");
		is($r->{version}, 'TLSv1.3', "$role: version");
		is($r->{cipher}, $su->{cipher}, "$role: cipher");
		cmp_ok($r->{bytes_sent}     // 0, '>', 0, "$role: bytes_sent");
		cmp_ok($r->{bytes_received} // 0, '>', 0, "$role: bytes_received");
		is($r->{bytes_sent}, $su->{bytes_sent},
			"$role: bytes_sent as the superuser sees it");
		is_deeply([ grep { !defined $r->{$_} } @hidden_cols ],
			['last_rekey'],
			"$role: every column but last_rekey (no rekey yet) has a value");
	}
	$s->quit;
	ok(wait_backends_gone($node, $pid), 'alice gone');
}

# ---------------------------------------------------------------------
# 8. Failed logins over TLS count as connections
# ---------------------------------------------------------------------

{
	$node->safe_psql(
		'postgres', q{
		SET password_encryption = 'scram-sha-256';
		CREATE ROLE regress_pw LOGIN PASSWORD 'right';
		CREATE ROLE regress_rejected LOGIN;});

	my $t0 = totals_row($node);
	my ($ret, $out, $err) = $node->psql(
		'postgres',
		'SELECT 1',
		connstr => tls_connstr(
			$node,
			tls => '1.3',
			user => 'regress_pw',
			extra => 'password=wrong'),
		extra_params => ['-w']);
	isnt($ret, 0, 'wrong password: login fails');
	like(
		$err,
		qr/password authentication failed for user "regress_pw"/,
		'wrong password: the server said so (over TLS)');
	my $t1 = wait_totals_connections_change($node, $t0->{connections});
	is( $t1->{connections},
		$t0->{connections} + 1,
		'failed password login over TLS counted in totals.connections');
	cmp_ok($t1->{bytes_sent}, '>', $t0->{bytes_sent},
		'... and its bytes_sent (handshake, error)');
	cmp_ok($t1->{bytes_received}, '>', $t0->{bytes_received},
		'... and its bytes_received');

	# The same with a pg_hba.conf "reject" line.  NB: PostgreSQL's
	# ClientAuthentication() raises FATAL for "reject" (and for "no
	# pg_hba.conf entry") inside its switch on the method, before it calls
	# ClientAuthentication_hook, so the extension never attaches a slot for
	# such a connection and its TLS handshake reaches no total.  This is a
	# failed login over TLS like the one above, so it is asserted the same
	# way; it fails until the extension also counts connections that end
	# before the hook (see the accompanying report).
	($ret, $out, $err) = $node->psql(
		'postgres', 'SELECT 1',
		connstr =>
		  tls_connstr($node, tls => '1.3', user => 'regress_rejected'),
		extra_params => ['-w']);
	isnt($ret, 0, 'pg_hba.conf reject: login fails');
	like(
		$err,
		qr/pg_hba\.conf rejects connection .*SSL encryption/,
		'pg_hba.conf reject: rejected on the TLS connection');
	my $t2 = wait_totals_connections_change($node, $t1->{connections});
	is( $t2->{connections},
		$t1->{connections} + 1,
		'login rejected by pg_hba.conf over TLS counted in totals.connections'
	);
	cmp_ok($t2->{bytes_sent}, '>', $t1->{bytes_sent},
		'... and its bytes_sent');
}

$node->stop;
note 'runtime: ' . (time() - $t_start) . ' s';
done_testing();
