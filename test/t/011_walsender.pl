
# A streaming standby over TLS 1.3 with ssl_renegotiate.byte_limit = 64kB on the
# primary: the walsender rotates its sending key as WAL streams, the data
# arrives intact, and a limit changed with ALTER SYSTEM + pg_reload_conf()
# reaches the live walsender.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $LIMIT = 65536;

# The largest message a walsender sends: CopyData (type + length) around an
# XLogData message ('w', start, end, send time: 1 + 3 * 8 bytes) carrying
# at most MAX_SEND_SIZE = 16 * XLOG_BLCKSZ bytes of WAL.
my $MAX_WAL_MESSAGE = 1 + 4 + 1 + 3 * 8 + 16 * 8192;

# The most one sending key can carry (SslrTest::send_key_bound): below the
# limit at a safe point, then one more message at most, and up to 8 kB of
# small ones (keepalives and the like) still buffered.
my $BOUND = send_key_bound($LIMIT, $MAX_WAL_MESSAGE);

my $bad_log_re =
  qr/SSL error|could not receive data|could not send data|unexpected EOF|bad length|terminating walsender|terminating walreceiver|server process .* was terminated|terminated by signal|ssl_renegotiate: terminated/;

my $primary = new_tls_node(
	'primary',
	allows_streaming => 1,
	conf => "ssl_renegotiate.byte_limit = 64kB\n"
	  . "ssl_renegotiate.log_rekeys = on\n"
	  # allows_streaming's shared_buffers = 1MB makes the bulk writes and
	  # the checksums below slow
	  . "shared_buffers = 128MB\n"
	  . "max_wal_size = 1GB\n"
	  . "wal_keep_size = 512MB\n");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

$primary->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
my $conninfo = tls_primary_conninfo($standby, $primary, tls => '1.3');
note "primary_conninfo: $conninfo";
$standby->start;

# Touch WAL once and wait, so that the walsender is streaming.
$primary->safe_psql('postgres', 'CREATE TABLE w (i int, t text)');
$primary->wait_for_catchup('standby');

my $walpid = $primary->safe_psql('postgres',
	"SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'");
like($walpid, qr/^\d+$/, 'walsender pid from pg_stat_replication');
is( $primary->safe_psql(
		'postgres',
		"SELECT ssl, version FROM pg_stat_ssl WHERE pid = $walpid"),
	't|TLSv1.3',
	'walsender connection uses TLS 1.3');

my $r0 = activity_row($primary, $walpid);
ok(defined $r0, 'walsender has an ssl_renegotiate_activity row');
is($r0->{backend_type}, 'walsender', "backend_type = 'walsender'");
is($r0->{version}, 'TLSv1.3', 'activity row: TLSv1.3');

# Writes WAL with $sql, waits for the standby to replay it, returns the
# number of WAL bytes written and the walsender's activity row afterwards.
sub stream
{
	my ($sql) = @_;
	my $lsn0 = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	$primary->safe_psql('postgres', $sql);
	my $lsn1 = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	$primary->wait_for_catchup('standby', 'replay', $lsn1);
	my $wal = $primary->safe_psql('postgres',
		"SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')");
	return ($wal, activity_row($primary, $walpid));
}

# Same rows on both sides?
sub check_data
{
	my ($what) = @_;
	# a sum of per-row hashes: order-independent, no sort, no big string
	my $q =
	  "SELECT count(*), sum(i), sum(hashtext(i || ':' || t)::bigint) FROM w";
	my $p = $primary->safe_psql('postgres', $q);
	my $s = $standby->safe_psql('postgres', $q);
	is($s, $p, "$what: standby has the same rows as the primary ($s)");
}

# ---------------------------------------------------------------------
# >= 50 MB of WAL at 64kB
#
# A walsender that is behind sends WAL in XLogData messages of up to 128 kB,
# and a key rotates only between messages, so one key carries between
# 64 kB and about 64 + 128 + 8 kB: the rotation count is bounded by
# bytes / $BOUND below, not by bytes / (64 kB + a small message).
# ---------------------------------------------------------------------
my ($wal1, $r1) = stream(
	q{INSERT INTO w SELECT i, repeat(md5(i::text), 8) FROM generate_series(1, 180000) i}
);
cmp_ok($wal1, '>=', 50_000_000, 'wrote >= 50 MB of WAL');
check_data('64kB');

my $sent1 = $r1->{bytes_sent} - $r0->{bytes_sent};
my $rekeys1 = $r1->{rekeys_sent} - $r0->{rekeys_sent};
note "64kB: $wal1 bytes of WAL, walsender sent $sent1 bytes, "
  . "rekeys_sent $rekeys1 (one per "
  . int($sent1 / ($rekeys1 || 1))
  . " bytes), max_sent_per_key $r1->{max_sent_per_key} (bound $BOUND), "
  . "rekeys_received $r1->{rekeys_received}, bytes_received $r1->{bytes_received}, "
  . "max_received_per_key $r1->{max_received_per_key}";
cmp_ok($sent1, '>=', $wal1, 'walsender sent at least the WAL');
cmp_ok(
	$rekeys1, '>=',
	int($sent1 / $BOUND) - 1,
	"walsender rekeys_sent >= bytes_sent / $BOUND");
cmp_ok(
	$rekeys1, '<=',
	int($sent1 / $LIMIT) + 1,
	'walsender rekeys_sent <= bytes_sent / 64kB + 1');
cmp_ok($r1->{max_sent_per_key},
	'>=', $LIMIT, 'walsender max_sent_per_key reaches the limit');
cmp_ok($r1->{max_sent_per_key}, '<=', $BOUND,
	'walsender max_sent_per_key <= 64kB + 8kB + largest WAL message + TLS overhead'
);
# The standby sends little (feedback messages), so its key may well never
# rotate; the counters must still be there and agree with each other.
ok(defined $r1->{rekeys_received} && $r1->{rekeys_received} >= 0,
	'walsender rekeys_received is a count (>= 0)');
cmp_ok(
	(($r1->{rekeys_received} // 0) + 1) * ($r1->{max_received_per_key} // 0),
	'>=',
	$r1->{bytes_received},
	'walsender (rekeys_received + 1) * max_received_per_key >= bytes_received'
);
cmp_ok(
	$r1->{max_received_per_key},
	'<=',
	64 * 1024 * 1024,
	'walsender max_received_per_key <= 64 MB');
is($r1->{rekey_failures}, 0, 'walsender: no rekey failures');

# ---------------------------------------------------------------------
# ALTER SYSTEM + reload reaches the live walsender
# ---------------------------------------------------------------------

# After pg_reload_conf(), the postmaster re-reads the file and signals its
# children; once a new backend sees the new value, the walsender has been
# signalled.  A small write + catch-up then makes it go round its loop,
# where it processes the reload.
sub set_limit
{
	my ($value) = @_;
	$primary->safe_psql('postgres',
		qq{ALTER SYSTEM SET ssl_renegotiate.byte_limit = '$value'; SELECT pg_reload_conf();}
	);
	$primary->poll_query_until('postgres',
		qq{SELECT current_setting('ssl_renegotiate.byte_limit') = '$value'})
	  or die "the reload of ssl_renegotiate.byte_limit = $value was not seen";
	stream(q{INSERT INTO w VALUES (0, 'sync')});
}

set_limit('100MB');
my ($r2) = (stream('SELECT 1'))[1];
my ($wal3, $r3) = stream(
	q{INSERT INTO w SELECT i, repeat(md5(i::text), 8) FROM generate_series(200001, 235000) i}
);
cmp_ok($wal3, '>=', 10_000_000, '100MB: wrote >= 10 MB of WAL');
check_data('100MB');
my $rekeys3 = $r3->{rekeys_sent} - $r2->{rekeys_sent};
note "100MB: $wal3 bytes of WAL, rekeys_sent grew by $rekeys3, "
  . "sent_since_rekey $r3->{sent_since_rekey}, max_sent_per_key $r3->{max_sent_per_key}";
cmp_ok($rekeys3, '<=', 1,
	'100MB: rekeys_sent grew by <= 1 (the live walsender uses the new limit)'
);
cmp_ok($r3->{sent_since_rekey},
	'>=', 10_000_000, '100MB: the current key carried >= 10 MB');
cmp_ok($r3->{max_sent_per_key},
	'>=', 10_000_000, '100MB: max_sent_per_key >= 10 MB');

set_limit('64kB');
my ($r4) = (stream('SELECT 1'))[1];
my ($wal5, $r5) = stream(
	q{INSERT INTO w SELECT i, repeat(md5(i::text), 8) FROM generate_series(300001, 335000) i}
);
cmp_ok($wal5, '>=', 10_000_000, 'back to 64kB: wrote >= 10 MB of WAL');
check_data('back to 64kB');
my $sent5 = $r5->{bytes_sent} - $r4->{bytes_sent};
my $rekeys5 = $r5->{rekeys_sent} - $r4->{rekeys_sent};
note
  "back to 64kB: $wal5 bytes of WAL, $sent5 bytes sent, rekeys_sent grew by $rekeys5, "
  . "sent_since_rekey $r5->{sent_since_rekey}";
cmp_ok(
	$rekeys5, '>=',
	int($sent5 / $BOUND) - 1,
	"back to 64kB: rekeys_sent grew by >= bytes_sent / $BOUND");
cmp_ok(
	$rekeys5, '<=',
	int($sent5 / $LIMIT) + 1,
	'back to 64kB: rekeys_sent grew by <= bytes_sent / 64kB + 1');
cmp_ok($r5->{sent_since_rekey},
	'<=', $BOUND, 'back to 64kB: the current key is within the bound again');
is($r5->{rekey_failures}, 0, 'walsender: still no rekey failures');

# Same walsender throughout
is( $primary->safe_psql(
		'postgres',
		"SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'"
	),
	$walpid,
	'the same walsender streamed all along');

# Log: one line per rotation of this walsender, or counted as not logged.
{
	my $log = slurp_file($primary->logfile);
	my $lines = () = $log =~
	  /ssl_renegotiate: (?:rotated the sending key of pid \Q$walpid\E |client of pid \Q$walpid\E rotated)/g;
	my $dropped = 0;
	$dropped += $1
	  while $log =~
	  /ssl_renegotiate: (\d+) more rekeys of pid \Q$walpid\E were not logged/g;
	# The walsender goes on streaming (the bgwriter's running-xacts WAL,
	# status messages): the log, read after $r5, may hold rotations since.
	my $r6 = activity_row($primary, $walpid);
	my $logged = $lines + $dropped;
	ok( $logged >= $r5->{rekeys_sent} + $r5->{rekeys_received}
		  && $logged <= $r6->{rekeys_sent} + $r6->{rekeys_received},
		'walsender: log lines + "not logged" = rekeys_sent + rekeys_received '
		  . "($logged, between the rows read before and after the log: "
		  . ($r5->{rekeys_sent} + $r5->{rekeys_received}) . ', '
		  . ($r6->{rekeys_sent} + $r6->{rekeys_received}) . ')');
}

unlike(slurp_file($primary->logfile),
	$bad_log_re, 'primary log: no SSL or connection errors');
unlike(slurp_file($standby->logfile),
	$bad_log_re, 'standby log: no SSL or connection errors');

$standby->stop;
$primary->stop;
done_testing();
