# A primary and a hot standby, both with ssl_renegotiate preloaded, streaming
# over TLS (primary_conninfo with sslmode=verify-ca) at byte_limit = 64kB.
#
#  - The primary counts its walsender, which rotates its sending key as WAL
#    streams (asserted on deltas: a walsender's counts include WAL segment
#    padding); ssl_renegotiate_rekey() on it rotates both directions (the
#    walreceiver's libpq answers the KeyUpdate).
#  - The standby's walreceiver is a libpq connection inside the standby: it
#    has no row in the standby's ssl_renegotiate_activity, and its bytes are
#    in no total of the standby.  The standby's totals grow by its own TLS
#    client's bytes only, which equal the kernel's counts for its socket.
#  - A hot-standby session reads every view.
#  - ssl_renegotiate_reset() on the standby zeroes the standby's totals only
#    (shared memory of that server; nothing goes through WAL), and so does
#    ssl_renegotiate_reset_database_role_totals().
#  - A clean restart of the standby keeps its totals; after promotion, the
#    former standby keeps its totals and its sessions' rows (promotion
#    restarts no process that holds them).
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $LIMIT = 65536;
# CopyData around an XLogData message of at most 16 * XLOG_BLCKSZ of WAL
my $MAX_WAL_MESSAGE = 1 + 4 + 1 + 3 * 8 + 16 * 8192;

my $bad_log_re =
  qr/SSL error|could not receive data|could not send data|unexpected EOF|terminating walsender|terminating walreceiver|terminated by signal|ssl_renegotiate: terminated/;

my $primary = new_tls_node(
	'primary',
	allows_streaming => 1,
	conf => "ssl_renegotiate.byte_limit = 64kB\n"
	  . "shared_buffers = 128MB\n"
	  . "max_wal_size = 1GB\n"
	  . "wal_keep_size = 256MB\n");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

# The standby inherits the primary's postgresql.conf: preloaded, TLS on,
# byte_limit = 64kB (which would rotate the walreceiver's connection too, if
# the standby took it for one of its own).
$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
my $conninfo = tls_primary_conninfo(
	$standby, $primary,
	sslmode => 'verify-ca',
	sslrootcert => $primary->{_sslr_certs}{ca_crt});
note "primary_conninfo: $conninfo";
$standby->start;
# a commit to replay, which the standby reports at once (the end of the
# backup alone is reported at its next status interval, 10 s)
$primary->safe_psql('postgres', 'CREATE TABLE w (i int, t text)');
$primary->wait_for_catchup('standby', 'replay', $primary->lsn('insert'));

my $walpid = $primary->safe_psql('postgres',
	"SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'");
like($walpid, qr/^\d+$/, 'primary: walsender pid from pg_stat_replication');
is( $primary->safe_psql(
		'postgres', "SELECT ssl FROM pg_stat_ssl WHERE pid = $walpid"),
	't',
	'primary: the standby streams over TLS');
my $receiver_pid =
  $standby->safe_psql('postgres', 'SELECT pid FROM pg_stat_wal_receiver');
like($receiver_pid, qr/^\d+$/,
	'standby: walreceiver pid from pg_stat_wal_receiver');

# The standby's only TLS session: a client whose row and share of the totals
# are checked against the kernel's counts.
my $client = background_tls_psql($standby, tls_connstr($standby));
my $client_pid = $client->query_safe('SELECT pg_backend_pid()');
is($client->query_safe('SELECT pg_is_in_recovery()'),
	't', 'standby client: the server is in recovery');

# The standby's totals equal its client's row, exactly; with one TLS
# session ever on the standby, connections = 1.
sub standby_totals_are_clients
{
	my ($what, $base) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $row =
	  kernel_exact_row($standby, $client_pid, "$what, standby client");
	my $t = totals_row($standby);
	$base //= { bytes_sent => 0, bytes_received => 0 };
	is( $t->{bytes_received},
		$row->{bytes_received} - $base->{bytes_received},
		"$what: standby totals bytes_received == the client's");
	is( $t->{bytes_sent},
		$row->{bytes_sent} - $base->{bytes_sent},
		"$what: standby totals bytes_sent == the client's");
	note
	  "$what: standby totals sent $t->{bytes_sent} received $t->{bytes_received}; "
	  . "client row sent $row->{bytes_sent} received $row->{bytes_received}";
	return ($row, $t);
}

my ($c0, $t0) = standby_totals_are_clients('before streaming');
is($t0->{connections}, 1,
	'before streaming: standby totals count 1 connection');

# ---------------------------------------------------------------------
# Stream ~20 MB of WAL
# ---------------------------------------------------------------------
my $w0 = activity_row($primary, $walpid);
ok(defined $w0, 'primary: the walsender has a row');
is($w0->{backend_type}, 'walsender', "primary: backend_type = 'walsender'");

my $lsn0 = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$primary->safe_psql('postgres',
	q{INSERT INTO w SELECT i, repeat(md5(i::text), 8) FROM generate_series(1, 66000) i}
);
my $lsn1 = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$primary->wait_for_catchup('standby', 'replay', $lsn1);
my $wal =
  $primary->safe_psql('postgres', "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')");
cmp_ok($wal, '>=', 20_000_000, 'primary: wrote >= 20 MB of WAL');

my $w1 = activity_row($primary, $walpid);
my ($wsent) =
  check_walsender_rotation($w0, $w1, $LIMIT, $MAX_WAL_MESSAGE,
	'primary walsender');
cmp_ok($wsent, '>=', $wal,
	'primary walsender: bytes_sent grew by at least the WAL');

rekey_walsender(
	$primary, $walpid,
	q{INSERT INTO w VALUES (0, 'nudge')},
	'primary walsender');

my $q = "SELECT count(*), sum(hashtext(i || ':' || t)::bigint) FROM w";
is( $standby->safe_psql('postgres', $q),
	$primary->safe_psql('postgres', $q),
	'standby has the same rows as the primary');

is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM ssl_renegotiate_activity WHERE pid = $receiver_pid"
	),
	'0',
	'standby: no activity row for the walreceiver');
is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(pid::text, ',') FROM ssl_renegotiate_activity"),
	$client_pid,
	"standby: the activity view's only row is the client's");
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM ssl_renegotiate_activity($receiver_pid)"),
	'0',
	'standby: ssl_renegotiate_activity(walreceiver pid) is empty');

# The client was idle: its row and the totals have not moved while the
# walreceiver received the WAL.
my ($c1, $t1) = standby_totals_are_clients('after streaming');
is( $c1->{bytes_sent} . '/' . $c1->{bytes_received},
	$c0->{bytes_sent} . '/' . $c0->{bytes_received},
	'after streaming: the idle client row did not move');
is($t1->{connections}, 1,
	'after streaming: still 1 connection in the standby totals');
is( $standby->safe_psql(
		'postgres',
		'SELECT coalesce(sum(bytes_sent + bytes_received), 0) = '
		  . "$t1->{bytes_sent} + $t1->{bytes_received} FROM ssl_renegotiate_database_role_totals"
	),
	't',
	'standby: the database-role totals hold the client only');

# ---------------------------------------------------------------------
# The client reads the views and the table (a hot-standby query), at the
# standby's byte_limit = 64kB
# ---------------------------------------------------------------------
is( $client->query_safe(
		"SELECT count(*) FILTER (WHERE pid = pg_backend_pid() AND bytes_sent > 0), count(*) "
		  . "FROM ssl_renegotiate_activity"),
	'1|1',
	'hot standby: the client reads its own row (and only it) in the activity view'
);
like(
	$client->query_safe(
		'SELECT connections, bytes_sent > 0 FROM ssl_renegotiate_totals'),
	qr/^1\|t$/,
	'hot standby: the client reads the totals');
like(
	$client->query_safe(
			'SELECT count(*) FROM ssl_renegotiate_database_role_totals; '
		  . 'SELECT evicted FROM ssl_renegotiate_database_role_totals_info'),
	qr/^\d+\n0$/,
	'hot standby: the client reads the database-role totals and their info');
$client->query_safe(q{\copy (SELECT * FROM w) to '/dev/null'});
my ($c2, $t2) = standby_totals_are_clients('after the client read the table');
cmp_ok($c2->{bytes_sent} - $c1->{bytes_sent},
	'>=', 15_000_000, 'standby client: received the table (>= 15 MB)');
cmp_ok($c2->{rekeys_sent}, '>=', 100,
	'standby client: its key rotated at 64kB');

# ---------------------------------------------------------------------
# Resets on the standby: they zero the standby's own totals; live sessions
# count from then on; the primary's are untouched.
# ---------------------------------------------------------------------
my $p_before = totals_row($primary);
$standby->safe_psql('postgres',
	'SELECT ssl_renegotiate_reset(); SELECT ssl_renegotiate_reset_database_role_totals()'
);
my $t3 = totals_row($standby);
is($t3->{bytes_sent} + $t3->{bytes_received},
	0, 'reset on the standby: its totals are zero (the client idle)');
isnt($t3->{stats_reset}, $t2->{stats_reset},
	'reset on the standby: a new stats_reset');
# the live client's pair may show again, counting from the reset
is( $standby->safe_psql(
		'postgres',
		'SELECT coalesce(sum(bytes_sent + bytes_received), 0) FROM ssl_renegotiate_database_role_totals'
	),
	'0',
	'reset on the standby: the database-role totals are zero');
my $p_after = totals_row($primary);
is( $p_after->{stats_reset},
	$p_before->{stats_reset},
	"reset on the standby: the primary's stats_reset unchanged");
cmp_ok(
	$p_after->{bytes_sent},
	'>=',
	$p_before->{bytes_sent},
	"reset on the standby: the primary's totals not reset");

$client->query_safe(q{SELECT repeat('y', 300000)});
my ($c4, $t4) = standby_totals_are_clients('after the reset', $c2);
cmp_ok($t4->{bytes_sent}, '>=', 300_000,
	'after the reset: the live client counts on');

# The primary, streaming a little more: the walreceiver still not counted.
$primary->safe_psql('postgres',
	q{INSERT INTO w SELECT i, repeat('z', 500) FROM generate_series(1, 5000) i}
);
$primary->wait_for_catchup('standby', 'replay', $primary->lsn('insert'));
standby_totals_are_clients('after more WAL', $c2);

unlike(slurp_file($primary->logfile),
	$bad_log_re, 'primary log: no SSL or connection errors');
unlike(slurp_file($standby->logfile),
	$bad_log_re, 'standby log: no SSL or connection errors');

# ---------------------------------------------------------------------
# A clean restart of the standby keeps its totals (the postmaster writes
# them at a shutdown in recovery too); the walreceiver's new connection is
# not counted either.
# ---------------------------------------------------------------------
$client->quit;
$standby->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM ssl_renegotiate_activity')
  or die 'the standby client did not exit';
my $t6 = totals_row($standby);
$standby->restart;
$primary->safe_psql('postgres', q{INSERT INTO w VALUES (0, 'after restart')});
$primary->wait_for_catchup('standby', 'replay', $primary->lsn('insert'));
my $t7 = totals_row($standby);
is( join('/', @$t7{qw(stats_reset connections bytes_sent bytes_received)}),
	join('/', @$t6{qw(stats_reset connections bytes_sent bytes_received)}),
	'standby restarted: totals kept as they were (stats_reset, connections, bytes)'
);
is( $standby->safe_psql(
		'postgres', 'SELECT count(*) FROM ssl_renegotiate_activity'),
	'0',
	'standby restarted and streaming: no activity row');

# ---------------------------------------------------------------------
# Promotion: the totals and a client's row stay
# ---------------------------------------------------------------------
$client = background_tls_psql($standby, tls_connstr($standby));
$client_pid = $client->query_safe('SELECT pg_backend_pid()');
my $restarted = { map { $_ => -$t7->{$_} } qw(bytes_sent bytes_received) };
my ($c8) =
  standby_totals_are_clients('a new client after the restart', $restarted);
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	'f', 'standby promoted');
my ($c9, $t9) = standby_totals_are_clients('after promotion', $restarted);
is($t9->{stats_reset}, $t7->{stats_reset},
	'after promotion: the same stats_reset');
is($c9->{bytes_sent}, $c8->{bytes_sent},
	'after promotion: the client row as before');
is($client->query_safe('SELECT pg_is_in_recovery()'),
	'f', 'after promotion: the client session goes on');
$client->quit;

$standby->stop;
$primary->stop;
done_testing();
