
# Citus: a coordinator and two workers, each a TLS server with Citus and
# ssl_renegotiate preloaded (shared_preload_libraries = 'citus,
# ssl_renegotiate', Citus first as it requires), at byte_limit = 64kB.
# The nodes reach each other as Citus does, with libpq and
# citus.node_conninfo = 'sslmode=verify-full sslrootcert=<the test CA>'.
# Through one held client session on the coordinator (TLS too; Citus
# caches its connections to the workers per session, one per worker with
# citus.max_adaptive_executor_pool_size = 1):
#
#  - a COPY of about 170 MB into a distributed table and out of it, a
#    repartition join (the workers exchange the join column's partitions
#    over their own connections to each other) and a shard move
#    (citus_move_shard_placement, block_writes), each checked by
#    checksums of the rows;
#  - after each: on every node, every row of ssl_renegotiate_activity
#    equals the kernel's counts of its backend's socket (ss), both
#    directions; the rows are exactly the node's TCP connections (one per
#    backend with an established socket on its port, none for the libpq
#    ends of its own backends); the client end of each is found by its
#    port and named (the test's client, the coordinator, a worker); the
#    node's totals grew by its own rows and, where Citus closed
#    connections meanwhile, by no less;
#  - the cached inter-node connections rotate their keys both ways about
#    once per 64 kB, no rotation fails, no query fails and no connection
#    is replaced (the same backend pids, the same client ports);
#  - ssl_renegotiate_rekey(pid) of the worker backend serving each cached
#    coordinator connection rotates both directions once, between
#    queries, with no failure;
#  - hard_limit: with byte_limit = 0 and hard_limit = 64MB on one worker,
#    a COPY out of the table ends that worker's cached connection; what
#    Citus does with it (the error the client gets, whether the session
#    goes on) is checked, as docs/citus.md describes it.
#
# Needs Citus installed into the PostgreSQL under test (scripts/
# citus_build.sh; scripts/test.sh does it for the cell 17); skipped
# otherwise.  Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use Digest::MD5 qw(md5_hex);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SslrTest;

my ($pkglibdir, $sharedir) = ('', '');
IPC::Run::run([ 'pg_config', '--pkglibdir' ], '>', \$pkglibdir);
IPC::Run::run([ 'pg_config', '--sharedir' ], '>', \$sharedir);
chomp($pkglibdir, $sharedir);
plan skip_all =>
  "Citus is not installed into this PostgreSQL (no $pkglibdir/citus.so; scripts/citus_build.sh installs it)"
  unless -f "$pkglibdir/citus.so" && -f "$sharedir/extension/citus.control";

my $t_start = time();
my $LIMIT = 64 * 1024;
# A sending key carries the limit plus what is in flight when it is
# crossed; 4 x the limit is a sane bound (as in test/t/060), bytes / that a
# lower one for the rotations.  A receiving key rotates when the peer
# answers the request for a new one, and a libpq peer answers only when it
# reads: a coordinator streaming a COPY to a worker reads now and then, so
# the worker's receiving keys carry a few MB (docs/citus.md has the
# numbers).  The bound is the one hard_limit leaves the peers: byte_limit
# + 64MB.
my $KEY_BOUND = 4 * $LIMIT;
my $RECV_BOUND = $LIMIT + 64 * 1024 * 1024;
my $ROWS = 1_000_000;    # about 170 MB in COPY text form
my $DIM = 2000;          # the repartition join's other table

my $certs = make_certs();
my $conf = <<"EOC";
shared_preload_libraries = 'citus, ssl_renegotiate'
ssl_renegotiate.byte_limit = '64kB'
citus.node_conninfo = 'sslmode=verify-full sslrootcert=$certs->{ca_crt}'
citus.local_hostname = '127.0.0.1'
citus.enable_statistics_collection = off
# no connections of the maintenance daemon's while the test counts
citus.distributed_deadlock_detection_factor = -1
citus.recover_2pc_interval = -1
citus.defer_shard_delete_interval = -1
citus.max_adaptive_executor_pool_size = 1
citus.enable_repartition_joins = on
citus.shard_count = 8
max_prepared_transactions = 10
log_statement = none
EOC

my $coord = new_tls_node('coordinator', certs => $certs, conf => $conf);
my $w1 = new_tls_node('worker1', certs => $certs, conf => $conf);
my $w2 = new_tls_node('worker2', certs => $certs, conf => $conf);
my @nodes = ($coord, $w1, $w2);
$_->start for @nodes;
$_->safe_psql('postgres',
	'CREATE EXTENSION citus; CREATE EXTENSION ssl_renegotiate')
  for @nodes;
$coord->safe_psql('postgres',
	"SELECT citus_set_coordinator_host('127.0.0.1', ${\ $coord->port})");
$coord->safe_psql('postgres',
	"SELECT citus_add_node('127.0.0.1', ${\ $_->port})")
  for ($w1, $w2);
is( $coord->safe_psql(
		'postgres',
		"SELECT string_agg(nodeport::text, ',' ORDER BY nodeport) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0"
	),
	join(',', sort { $a <=> $b } map { $_->port } $w1, $w2),
	'citus_add_node: both workers are in the cluster');

# ---------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------

my %postmaster = map { $_->{_pid} => $_->name } @nodes;
my %node_by_port = map { $_->port => $_ } @nodes;

# Who holds the client end of a connection to $port from $cport: the name
# of the node whose backend (or background process) it is, 'client' for
# the test's own psql, '?' if not found.
sub client_of
{
	my ($port, $cport) = @_;
	my $pid = pid_of_socket($cport, $port);
	return '?' unless defined $pid;
	open(my $fh, '<', "/proc/$pid/stat") or return '?';
	my $stat = <$fh>;
	close $fh;
	my ($ppid) = $stat =~ /^\d+ \(.*\) \S (\d+)/;
	return $postmaster{$ppid} // 'client';
}

# The pids of the backends with an established socket on the node's port.
sub socket_pids
{
	my ($node) = @_;
	my ($out, $err) = ('', '');
	my $port = $node->port;
	IPC::Run::run(
		[ 'ss', '-tnpH', 'state', 'established', "( sport = :$port )" ],
		'<', \undef, '>', \$out, '2>', \$err)
	  or die "ss failed: $err";
	my %p = map { $_ => 1 } $out =~ /\bpid=(\d+),/g;
	return join(',', sort { $a <=> $b } keys %p);
}

my @COLS = qw(pid bytes_received bytes_sent rekeys_sent rekeys_received
  rekey_failures rekey_requests rekey_requested max_sent_per_key
  max_received_per_key client_port);

# The node's rows, pid => hashref, after each backend settled (idle, its
# socket quiet); each with its kernel counts (krcv, ksent) and its client
# (client_of).
sub node_rows
{
	my ($node) = @_;
	my $sql =
	  'SELECT a.pid, a.bytes_received, a.bytes_sent, a.rekeys_sent, a.rekeys_received, '
	  . 'a.rekey_failures, a.rekey_requests, a.rekey_requested::int, a.max_sent_per_key, '
	  . 'a.max_received_per_key, s.client_port FROM ssl_renegotiate_activity a '
	  . 'JOIN pg_stat_activity s USING (pid) ORDER BY a.pid';
	my @pids = split /\n/,
	  $node->safe_psql('postgres',
		'SELECT pid FROM ssl_renegotiate_activity');
	wait_idle($node, $_) for @pids;
	my %rows;
	for my $line (split /\n/, $node->safe_psql('postgres', $sql))
	{
		my %r;
		@r{@COLS} = split /\|/, $line;
		@r{qw(krcv ksent)} = kernel_tls_counts($node, $r{pid});
		$r{client} = client_of($node->port, $r{client_port});
		$rows{ $r{pid} } = \%r;
	}
	return \%rows;
}

sub totals
{
	my ($node) = @_;
	my $t = totals_row($node);
	return { map { $_ => $t->{$_} }
		  qw(bytes_received bytes_sent connections terminations) };
}

# The state of every node: name => { rows, totals }.
my %state;

sub snapshot
{
	my %s;
	for my $node (@nodes)
	{
		my $rows = node_rows($node);
		$s{ $node->name } =
		  { rows => $rows, totals => totals($node), node => $node };
	}
	return \%s;
}

# What a row carried, for the notes.
sub row_text
{
	my ($r) = @_;
	return
		"pid $r->{pid} (client: $r->{client} port $r->{client_port}): "
	  . "received $r->{bytes_received} (kernel $r->{krcv}), sent $r->{bytes_sent} "
	  . "(kernel $r->{ksent}), rekeys_received $r->{rekeys_received}, rekeys_sent $r->{rekeys_sent}";
}

# Every node after a phase: rows against the kernel, rows against the
# sockets, totals against the rows.  Returns the snapshot.
sub check_phase
{
	my ($phase, $before) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $s = snapshot();
	for my $node (@nodes)
	{
		my $name = $node->name;
		my $rows = $s->{$name}{rows};
		note "$phase: $name: " . row_text($_)
		  for sort { $a->{pid} <=> $b->{pid} } values %$rows;
		is( join(
				' ',
				map {
					"$_:$rows->{$_}{bytes_received}/$rows->{$_}{bytes_sent}"
				} sort keys %$rows),
			join(
				' ',
				map {
						"$_:"
					  . ($rows->{$_}{krcv}  // 'none') . '/'
					  . ($rows->{$_}{ksent} // 'none')
				} sort keys %$rows),
			"$phase: $name: every row = the kernel's counts of its backend's socket (received/sent)"
		);
		is( join(',', sort { $a <=> $b } keys %$rows),
			socket_pids($node),
			"$phase: $name: a row for each TCP connection into the node, none for its libpq ends"
		);
		is(join(',', grep { $_->{client} eq '?' } values %$rows),
			'', "$phase: $name: every row's client end found");
		is( join(',',
				map  { $_->{rekey_failures} }
				grep { $_->{rekey_failures} } values %$rows),
			'',
			"$phase: $name: no rekey failures");
		next unless $before;
		my $b = $before->{$name};
		my $t0 = $b->{totals};
		my $t1 = $s->{$name}{totals};
		my @gone = grep { !$rows->{$_} } keys %{ $b->{rows} };
		my @new = grep { !$b->{rows}{$_} } keys %$rows;
		my %live;

		for my $k (qw(bytes_received bytes_sent))
		{
			$live{$k} = 0;
			$live{$k} += $_->{$k} for values %$rows;
			$live{$k} -= $b->{rows}{$_}{$k}
			  for grep { $rows->{$_} } keys %{ $b->{rows} };
		}
		my $conns = $t1->{connections} - $t0->{connections};
		my @d = map { $t1->{$_} - $t0->{$_} } qw(bytes_received bytes_sent);
		note
		  "$phase: $name: totals +$d[0] received, +$d[1] sent, +$conns connections; "
		  . "live rows +$live{bytes_received} received, +$live{bytes_sent} sent; "
		  . scalar(@new)
		  . " new rows, "
		  . scalar(@gone)
		  . " ended";
		if (!@gone && $conns == @new)
		{
			is( "@d",
				"$live{bytes_received} $live{bytes_sent}",
				"$phase: $name: the totals grew by exactly the node's rows (no connection ended)"
			);
		}
		else
		{
			ok( $d[0] >= $live{bytes_received} && $d[1] >= $live{bytes_sent},
				"$phase: $name: the totals grew by the node's live rows and the "
				  . ($conns - @new + @gone)
				  . " connections that ended meanwhile");
		}
	}
	return $s;
}

# The rows of $node whose client is $who.
sub rows_from
{
	my ($s, $node, $who) = @_;
	return
	  grep { $_->{client} eq $who } values %{ $s->{ $node->name }{rows} };
}

# Rotations of a row: sending keys about once per 64 kB, receiving keys
# within what hard_limit allows; some rotation each way once more than a
# key's worth went.
sub check_rotations
{
	my ($what, $r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	note
	  "$what: rekeys_sent $r->{rekeys_sent} over $r->{bytes_sent} bytes (max_sent_per_key "
	  . "$r->{max_sent_per_key}), rekeys_received $r->{rekeys_received} over $r->{bytes_received} "
	  . "bytes (max_received_per_key $r->{max_received_per_key})";
	cmp_ok(
		$r->{rekeys_sent}, '>=',
		int($r->{bytes_sent} / $KEY_BOUND),
		"$what: rekeys_sent >= bytes_sent / (4 x 64 kB)");
	cmp_ok($r->{max_sent_per_key},
		'<=', $KEY_BOUND, "$what: max_sent_per_key <= 4 x 64 kB");
	cmp_ok(
		$r->{rekeys_received}, '>=',
		int($r->{bytes_received} / $RECV_BOUND),
		"$what: rekeys_received >= bytes_received / (64 kB + 64MB)");
	cmp_ok($r->{max_received_per_key},
		'<=', $RECV_BOUND, "$what: max_received_per_key <= 64 kB + 64MB");
	cmp_ok($r->{"rekeys_$_"}, '>', 0, "$what: rekeys_$_ > 0")
	  for grep { $r->{"bytes_$_"} > $RECV_BOUND } qw(sent received);
	return;
}

# ---------------------------------------------------------------------
# The data: a file of $ROWS rows (id, k, payload), and its checksum:
# count, and two sums of 32-bit pieces of each line's MD5 (order-free, so
# the server computes the same from the shards in any order).
# ---------------------------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir();
my $file = "$dir/rows.copy";
my ($s1, $s2, $join_sum) = (0, 0, 0);
{
	open(my $fh, '>', $file) or die "cannot write $file: $!";
	for my $i (1 .. $ROWS)
	{
		my $k = $i % 1000;
		my $line = "$i\t$k\t" . (md5_hex($i) x 5);
		my $m = md5_hex($line);
		$s1 += hex(substr($m, 0, 8));
		$s2 += hex(substr($m, 8, 8));
		# dim holds d = 1 .. $DIM with k = d % 1000: two rows per k
		$join_sum += $k == 0 ? 3000 : 2 * $k + 1000;
		print $fh "$line\n";
	}
	close $fh;
}
my $expected = "$ROWS $s1 $s2";
my $checksum_sql =
  "SELECT count(*) || ' ' || coalesce(sum(('x' || lpad(substr(m, 1, 8), 16, '0'))::bit(64)::bigint), 0) "
  . "|| ' ' || coalesce(sum(('x' || lpad(substr(m, 9, 8), 16, '0'))::bit(64)::bigint), 0) "
  . "FROM (SELECT md5(id || E'\\t' || k || E'\\t' || payload) AS m FROM dist) x";

sub file_checksum
{
	my ($path) = @_;
	my ($n, $a, $b) = (0, 0, 0);
	open(my $fh, '<', $path) or die "cannot read $path: $!";
	while (my $line = <$fh>)
	{
		chomp $line;
		my $m = md5_hex($line);
		$a += hex(substr($m, 0, 8));
		$b += hex(substr($m, 8, 8));
		$n++;
	}
	close $fh;
	return "$n $a $b";
}

$coord->safe_psql(
	'postgres', qq{
CREATE TABLE dist (id bigint, k int, payload text);
SELECT create_distributed_table('dist', 'id');
CREATE TABLE dim (d bigint, k int);
SELECT create_distributed_table('dim', 'd');
INSERT INTO dim SELECT i, i % 1000 FROM generate_series(1, $DIM) i;
});

# The held session: TLS to the coordinator, the one whose cached
# connections to the workers the test follows.
# on_error_stop off: the hard_limit case goes on after the error.
my $client = background_tls_psql(
	$coord, tls_connstr($coord),
	timeout => 600,
	on_error_stop => 0);
my $cpid = $client->query_safe('SELECT pg_backend_pid()');
my $start = check_phase('setup');
my %times;

# ---------------------------------------------------------------------
# 1. COPY in and out through the coordinator
# ---------------------------------------------------------------------
my $t = time();
$client->query_safe("\\copy dist FROM '$file'");
$times{copy_in} = time() - $t;
is($coord->safe_psql('postgres', $checksum_sql),
	$expected,
	'COPY in: the table holds the rows of the file (count, checksum)');
my $after_in = check_phase('COPY in', $start);

# The held session's connections: one per worker, from the coordinator.
my %held;
for my $w ($w1, $w2)
{
	my @r = rows_from($after_in, $w, 'coordinator');
	is(scalar(@r), 1,
		'COPY in: ' . $w->name . ': one connection from the coordinator');
	$held{ $w->name } = $r[0];
	cmp_ok($r[0]{bytes_received}, '>=', 60_000_000,
			'COPY in: '
		  . $w->name
		  . ': its share of the rows came through it (>= 60 MB)');
	check_rotations('COPY in: ' . $w->name . "'s coordinator connection",
		$r[0]);
}

$t = time();
my $out = "$dir/out.copy";
$client->query_safe("\\copy dist TO '$out'");
$times{copy_out} = time() - $t;
is(file_checksum($out), $expected,
	'COPY out: the file holds the rows (count, checksum)');
unlink $out;
my $after_out = check_phase('COPY out', $after_in);

for my $w ($w1, $w2)
{
	my ($r) = grep { $_->{pid} == $held{ $w->name }{pid} }
	  rows_from($after_out, $w, 'coordinator');
	ok( defined $r,
		'COPY out: '
		  . $w->name
		  . ': the same connection from the coordinator');
	$r //= $held{ $w->name };
	cmp_ok($r->{bytes_sent} - $held{ $w->name }{bytes_sent}, '>=', 60_000_000,
			'COPY out: '
		  . $w->name
		  . ': its share of the rows went through it (>= 60 MB)');
	check_rotations('COPY out: ' . $w->name . "'s coordinator connection",
		$r);
	$held{ $w->name } = $r;
}

# ---------------------------------------------------------------------
# 2. A repartition join: the workers exchange partitions
# ---------------------------------------------------------------------
$t = time();
is( $client->query_safe(
		'SELECT count(*) || \' \' || sum(dim.d) || \' \' || sum(dist.id) FROM dist JOIN dim ON dist.k = dim.k'
	),
	2 * $ROWS . " $join_sum " . $ROWS * ($ROWS + 1),
	'repartition join: count and sums right');
$times{join} = time() - $t;
my $after_join = check_phase('repartition join', $after_out);
# The workers fetch each other's partitions over connections of their own,
# opened and closed within the join (Citus caches none of them): no row to
# set against the kernel after the fact, but their bytes are in the
# serving worker's totals, and nowhere else: the fetching backends (those
# of the held session) did not count them.
for my $w ($w1, $w2)
{
	my ($b, $a) = ($after_out->{ $w->name }, $after_join->{ $w->name });
	my %d;
	for my $k (qw(bytes_sent bytes_received))
	{
		my $live = 0;
		$live +=
		  $a->{rows}{$_}{$k} - ($b->{rows}{$_} ? $b->{rows}{$_}{$k} : 0)
		  for keys %{ $a->{rows} };
		$d{$k} = $a->{totals}{$k} - $b->{totals}{$k} - $live;
		$d{"live_$k"} = $live;
	}
	my $ended = $a->{totals}{connections} - $b->{totals}{connections};
	note 'repartition join: '
	  . $w->name
	  . ": $ended connections opened and closed, which "
	  . "sent $d{bytes_sent} and received $d{bytes_received} bytes; its live rows grew by "
	  . "$d{live_bytes_sent} sent, $d{live_bytes_received} received";
	cmp_ok($ended, '>', 0,
		'repartition join: ' . $w->name . ': served connections of the join');
	cmp_ok($d{bytes_sent}, '>=', 1_000_000,
			'repartition join: '
		  . $w->name
		  . ': partitions went out over them (>= 1 MB)');
	cmp_ok($d{live_bytes_received}, '<', 1_000_000,
			'repartition join: '
		  . $w->name
		  . "'s fetching backend did not count what it fetched");
}

# ---------------------------------------------------------------------
# 3. A shard move, worker1 to worker2
# ---------------------------------------------------------------------
my $shard = $coord->safe_psql('postgres',
	"SELECT s.shardid FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) "
	  . "JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'dist'::regclass "
	  . "AND n.nodeport = ${\ $w1->port} ORDER BY s.shardid LIMIT 1");
my $shard_bytes =
  $w1->safe_psql('postgres', "SELECT pg_total_relation_size('dist_$shard')");
$t = time();
$client->query_safe(
	"SELECT citus_move_shard_placement($shard, '127.0.0.1', ${\ $w1->port}, '127.0.0.1', ${\ $w2->port}, shard_transfer_mode => 'block_writes')"
);
$times{move} = time() - $t;
is( $coord->safe_psql(
		'postgres',
		"SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) WHERE p.shardid = $shard"
	),
	$w2->port,
	"shard move: shard $shard is on worker2");
is($client->query_safe($checksum_sql),
	$expected,
	'shard move: the table still holds the rows (count, checksum)');
my $after_move = check_phase('shard move', $after_join);
my $moved_in = 0;
{
	my $b = $after_join->{worker2};
	my $a = $after_move->{worker2};
	$moved_in = $a->{totals}{bytes_received} - $b->{totals}{bytes_received};
	note
	  "shard move: shard $shard of $shard_bytes bytes on disk; worker2 received $moved_in bytes";
	my $copy_text = $w2->safe_psql('postgres',
		"SELECT sum(length(id || E'\\t' || k || E'\\t' || payload) + 1) FROM dist_$shard"
	);
	cmp_ok($moved_in, '>=', $copy_text,
		"shard move: worker2's totals grew by at least the shard's rows ($copy_text bytes of COPY text)"
	);
}

# The held session's connections survived every phase: the same worker
# backends, the same client ports.
for my $w ($w1, $w2)
{
	my $h = $held{ $w->name };
	my $r = $after_move->{ $w->name }{rows}{ $h->{pid} };
	is( defined $r ? "$r->{client} $r->{client_port}" : 'gone',
		"coordinator $h->{client_port}",
		$w->name
		  . ': the cached coordinator connection is the one of the COPY, still open'
	);
}

# ---------------------------------------------------------------------
# 4. ssl_renegotiate_rekey() of the worker backend of each cached
#    coordinator connection
# ---------------------------------------------------------------------
for my $w ($w1, $w2)
{
	my $pid = $held{ $w->name }{pid};
	my $r0 = activity_row($w, $pid);
	is( $w->safe_psql('postgres', "SELECT ssl_renegotiate_rekey($pid)"),
		't',
		$w->name . ': ssl_renegotiate_rekey(coordinator connection) accepted'
	);
	# the worker rotates its key at its next send and asks the
	# coordinator's libpq for a new one, which answers with its next write
	is($client->query_safe('SELECT count(*) FROM dim'),
		$DIM, $w->name . ': a query after the request');
	is($client->query_safe('SELECT count(*) FROM dim'),
		$DIM, $w->name . ': and another');
	my $r1 = activity_row($w, $pid);
	note $w->name
	  . ": rekey on demand of pid $pid: rekeys_sent $r0->{rekeys_sent} -> $r1->{rekeys_sent}, "
	  . "rekeys_received $r0->{rekeys_received} -> $r1->{rekeys_received}";
	is( join(' ',
			map { $r1->{$_} - $r0->{$_} }
			  qw(rekeys_sent rekeys_received rekey_requests)),
		'1 1 1',
		$w->name . ': one request: each direction rotated once');
	ok(!$r1->{rekey_requested}, $w->name . ': nothing left pending');
	is($r1->{rekey_failures}, 0, $w->name . ': no rekey failures');
}
my $after_rekey = check_phase('rekey on demand', $after_move);

# Every rotation of the inter-node connections, for the notes and the
# documentation.
for my $w (@nodes)
{
	for my $r (sort { $a->{pid} <=> $b->{pid} }
		values %{ $after_rekey->{ $w->name }{rows} })
	{
		next if $r->{client} eq 'client';
		note 'rotations: '
		  . $w->name
		  . ' from '
		  . $r->{client}
		  . ": pid $r->{pid}: rekeys_sent $r->{rekeys_sent}, rekeys_received $r->{rekeys_received} "
		  . "over $r->{bytes_sent} / $r->{bytes_received} bytes";
	}
}

# The logs so far: nothing failed anywhere.
my $bad =
  qr/^.*(?:WARNING|ERROR|FATAL|PANIC|SSL error|SSL SYSCALL|could not (?:send|receive) data|unexpected EOF|terminated by signal).*$/m;
my %log_pos;
for my $node (@nodes)
{
	my $log = slurp_file($node->logfile);
	$log_pos{ $node->name } = length($log);
	is(join("\n", $log =~ /$bad/g),
		'', $node->name . ' log: no error, warning or connection trouble');
}

# ---------------------------------------------------------------------
# 5. hard_limit on worker2: byte_limit = 0, hard_limit = 64MB.  A COPY out
#    makes worker2 send more than that under one key (it ends the
#    connection with a FATAL), a COPY in makes it receive more (it stops
#    reading and drops the connection).  What does Citus do?
# ---------------------------------------------------------------------
$w2->safe_psql('postgres',
	"ALTER SYSTEM SET ssl_renegotiate.byte_limit = 0; ALTER SYSTEM SET ssl_renegotiate.hard_limit = '64MB'; SELECT pg_reload_conf()"
);

# The cached worker2 connection, once it enforces the new limits (it
# takes the reload at its next command).
sub w2_enforcing
{
	my ($what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$client->query_safe('SELECT count(*) FROM dim');
	my @r = rows_from(snapshot(), $w2, 'coordinator');
	is(scalar(@r), 1, "$what: one worker2 connection from the coordinator");
	my $pid = $r[0]{pid};
	ok( $w2->poll_query_until(
			'postgres',
			"SELECT byte_limit IS NULL AND hard_limit = 64 * 1024 * 1024 FROM ssl_renegotiate_activity WHERE pid = $pid"
		),
		"$what: the cached worker2 backend enforces byte_limit 0, hard_limit 64MB"
	);
	return $pid;
}

# One statement that worker2 ends: its error, the termination counted,
# the connection replaced at the next query, which succeeds.
sub hard_case
{
	my ($what, $sql, $log_re) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $pid = w2_enforcing($what);
	my $term0 = totals($w2)->{terminations};
	my $logpos = -s $w2->logfile;
	my ($out, $err) = bg_query($client, $sql);
	$err =~ s/\n+$//;
	note "$what: the client got: $err";
	like($err, qr/ERROR:  /, "$what: the statement fails with an ERROR");
	is(totals($w2)->{terminations},
		$term0 + 1, "$what: worker2 counts one termination");
	my $log = slurp_file($w2->logfile, $logpos);
	note "$what: worker2 log: $_"
	  for grep { /FATAL|ERROR|DETAIL|HINT|LOG:  ssl_renegotiate/ } split /\n/,
	  $log;
	like($log, $log_re, "$what: worker2 logs why");
	ok( !grep({ $_->{pid} == $pid }
			rows_from(snapshot(), $w2, 'coordinator')),
		"$what: the connection is gone");
	my ($aout, $aerr) = bg_query($client, 'SELECT count(*) FROM dist');
	note "$what: the next query: '$aout' '$aerr'";
	is("$aout$aerr", $ROWS,
		"$what: the session goes on: the next query succeeds");
	my @r = rows_from(snapshot(), $w2, 'coordinator');
	is(scalar(@r), 1, "$what: over a new worker2 connection");
	return $err;
}

my %hard;
$hard{send} = hard_case(
	'hard_limit, worker2 sending',
	"\\copy dist TO '/dev/null'",
	qr/FATAL:  terminating connection because more than ssl_renegotiate.hard_limit was sent under one TLS key/
);
like(
	$hard{send},
	qr/more than ssl_renegotiate.hard_limit was sent under one TLS key/,
	"hard_limit, worker2 sending: Citus passes on worker2's FATAL as the statement's ERROR"
);

$coord->safe_psql('postgres',
	"CREATE TABLE dist_hard (id bigint, k int, payload text); SELECT create_distributed_table('dist_hard', 'id')"
);
$hard{receive} = hard_case(
	'hard_limit, worker2 receiving',
	"\\copy dist_hard FROM '$file'",
	qr/FATAL:  terminating connection because more than ssl_renegotiate.hard_limit was received under one TLS key/
);
like(
	$hard{receive},
	qr/ERROR:  terminating connection because more than ssl_renegotiate.hard_limit was received under one TLS key/,
	"hard_limit, worker2 receiving: Citus passes on worker2's FATAL as the statement's ERROR"
);
is( $coord->safe_psql('postgres', 'SELECT count(*) FROM dist_hard'),
	0,
	'hard_limit, worker2 receiving: the COPY is rolled back on every worker');
unlink $file;

$client->quit;
$w2->safe_psql('postgres',
	'ALTER SYSTEM RESET ssl_renegotiate.hard_limit; ALTER SYSTEM RESET ssl_renegotiate.byte_limit; SELECT pg_reload_conf()'
);

note sprintf(
	'times: COPY in %.1f s, COPY out %.1f s, repartition join %.1f s, shard move %.1f s, whole test %.1f s',
	@times{qw(copy_in copy_out join move)},
	time() - $t_start);

$_->stop for @nodes;
done_testing();
