# Logical replication over TLS: a publisher at byte_limit = 64kB and a
# subscriber, both with ssl_renegotiate preloaded, a subscription with
# sslmode=require, an initial table copy and >= 20 MB of changes.
#
#  - The publisher counts the subscription's walsender, which rotates its
#    sending key as the changes stream (it mostly sends; the subscriber's
#    replies are small), with no failure; ssl_renegotiate_rekey() on it
#    rotates both directions (the apply worker's libpq answers).
#  - The subscriber's apply worker and tablesync worker talk to the
#    publisher through libpq inside the subscriber: they have no row in the
#    subscriber's ssl_renegotiate_activity and their bytes are in no total
#    of it.  The subscriber's totals are its own TLS client's bytes, which
#    equal the kernel's counts for its socket.
#  - The tables end identical.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $LIMIT = 65536;
# The largest message the walsender sends here: CopyData around an XLogData
# header and one row's change (well under 1 kB); what it writes is batched
# in PqSendBuffer, which send_key_bound() allows for.
my $MAX_CHANGE_MESSAGE = 1024;

my $bad_log_re =
  qr/SSL error|could not receive data|could not send data|unexpected EOF|terminating walsender|terminated by signal|ssl_renegotiate: terminated/;

my $common = "shared_buffers = 128MB\nmax_wal_size = 1GB\n";
my $publisher = new_tls_node(
	'publisher',
	allows_streaming => 'logical',
	conf => "ssl_renegotiate.byte_limit = 64kB\n$common");
my $subscriber = new_tls_node('subscriber', conf => $common);
$_->start for $publisher, $subscriber;

my $rows_sql =
  q{INSERT INTO t SELECT i, repeat(md5(i::text), 8) FROM generate_series(%d, %d) i};
for my $node ($publisher, $subscriber)
{
	$node->safe_psql('postgres',
		'CREATE EXTENSION ssl_renegotiate; CREATE TABLE t (i int PRIMARY KEY, s text)'
	);
}
$publisher->safe_psql('postgres',
	sprintf($rows_sql, 1, 10000) . '; CREATE PUBLICATION pub FOR TABLE t');

# The subscriber's only TLS session, open throughout.
my $client = background_tls_psql($subscriber, tls_connstr($subscriber));
my $client_pid = $client->query_safe('SELECT pg_backend_pid()');

# The subscriber's totals equal its client's row, which equals the
# kernel's counts; one TLS connection ever.
sub subscriber_totals_are_clients
{
	my ($what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $row = kernel_exact_row($subscriber, $client_pid,
		"$what, subscriber's client");
	my $t = totals_row($subscriber);
	is( $t->{bytes_received} . '/' . $t->{bytes_sent},
		$row->{bytes_received} . '/' . $row->{bytes_sent},
		"$what: subscriber totals bytes received/sent == the client's");
	is($t->{connections}, 1, "$what: subscriber totals count 1 connection");
	is( $subscriber->safe_psql(
			'postgres',
			"SELECT string_agg(pid::text, ',') FROM ssl_renegotiate_activity"
		),
		$client_pid,
		"$what: the subscriber's activity view has the client's row only");
	note
	  "$what: subscriber totals sent $t->{bytes_sent} received $t->{bytes_received}";
	return $t;
}

my $t0 = subscriber_totals_are_clients('before the subscription');

my $connstr = tls_connstr($publisher, sslmode => 'require');
$subscriber->safe_psql('postgres',
	"CREATE SUBSCRIPTION sub CONNECTION '$connstr' PUBLICATION pub");
$subscriber->wait_for_subscription_sync($publisher, 'sub');
is( table_copy_md5($subscriber, 't'),
	table_copy_md5($publisher, 't'),
	'initial copy: the tables are identical');
subscriber_totals_are_clients('after the table copy');

my $walpid = $publisher->safe_psql('postgres',
	"SELECT pid FROM pg_stat_replication WHERE application_name = 'sub'");
like($walpid, qr/^\d+$/, "publisher: the subscription's walsender pid");
is( $publisher->safe_psql(
		'postgres',
		"SELECT ssl, version FROM pg_stat_ssl WHERE pid = $walpid"),
	't|TLSv1.3',
	'publisher: the subscription streams over TLS 1.3');
my $w0 = activity_row($publisher, $walpid);
ok(defined $w0, 'publisher: the walsender has a row');
is($w0->{backend_type}, 'walsender', "publisher: backend_type = 'walsender'");

# ---------------------------------------------------------------------
# >= 20 MB of changes: inserts, updates and deletes
# ---------------------------------------------------------------------
$publisher->safe_psql('postgres', sprintf($rows_sql, 10001, 80000));
$publisher->safe_psql('postgres',
	q{UPDATE t SET s = upper(s) WHERE i % 10 = 0; DELETE FROM t WHERE i % 10 = 5}
);
$publisher->wait_for_catchup('sub');

my $w1 = activity_row($publisher, $walpid);
my ($sent, $rekeys_sent, $received, $rekeys_received) =
  check_walsender_rotation($w0, $w1, $LIMIT, $MAX_CHANGE_MESSAGE,
	'publisher walsender');
cmp_ok($sent, '>=', 20_000_000,
	'publisher walsender: sent >= 20 MB of changes');
cmp_ok($rekeys_sent, '>=', 200,
	'publisher walsender: rotated its sending key >= 200 times');
cmp_ok(
	$received, '<',
	$sent / 100,
	'publisher walsender: received far less than it sent');
is( $publisher->safe_psql(
		'postgres',
		"SELECT pid FROM pg_stat_replication WHERE application_name = 'sub'"),
	$walpid,
	'publisher: the same walsender streamed all along');

# The subscriber replies with little: its key rotates on request.
rekey_walsender(
	$publisher, $walpid,
	q{INSERT INTO t SELECT max(i) + 1, 'nudge' FROM t},
	'publisher walsender');
$publisher->wait_for_catchup('sub');

is( table_copy_md5($subscriber, 't'),
	table_copy_md5($publisher, 't'),
	'after the changes: the tables are identical');

my $apply_pid = $subscriber->safe_psql('postgres',
	"SELECT pid FROM pg_stat_subscription WHERE subname = 'sub' AND relid IS NULL"
);
like($apply_pid, qr/^\d+$/, "subscriber: the apply worker's pid");
is( $subscriber->safe_psql(
		'postgres',
		"SELECT count(*) FROM ssl_renegotiate_activity($apply_pid)"),
	'0',
	'subscriber: no activity row for the apply worker');
my $t1 = subscriber_totals_are_clients('after the changes');
cmp_ok($t1->{bytes_sent} + $t1->{bytes_received},
	'<', 100_000,
	'subscriber totals: grew by far less than the 20 MB replicated');

# The client reads the views and the table; its row and the totals follow.
like(
	$client->query_safe(
		'SELECT count(*) FROM t; SELECT connections FROM ssl_renegotiate_totals'
	),
	qr/^\d+\n1$/,
	"subscriber's client: reads the table and the totals");
$client->query_safe(q{\copy t to '/dev/null'});
my $t2 = subscriber_totals_are_clients('after the client read the table');
cmp_ok($t2->{bytes_sent}, '>=', 15_000_000,
	"subscriber totals: the client's copy of the table is counted");
$client->quit;

unlike(slurp_file($publisher->logfile),
	$bad_log_re, 'publisher log: no SSL or connection errors');
unlike(slurp_file($subscriber->logfile),
	$bad_log_re, 'subscriber log: no SSL or connection errors');

$subscriber->stop;
$publisher->stop;
done_testing();
