
# Connections that leave a server: postgres_fdw and dblink over TLS.
#
# Two nodes with ssl_renegotiate preloaded, both at byte_limit = 64kB and
# tls12 = renegotiate.  A psql client connects over TLS 1.3 to "local";
# its queries go through postgres_fdw and dblink to "far" (sslmode=
# verify-ca), over TLS 1.3 and over TLS 1.2 (ssl_max_protocol_version in
# the inner connection string).  Since 1.1 the record callback sits on every
# SSL object of a process, the local backend's libpq objects included; this
# shows that:
#
#  - the local client's row equals the kernel's counts for its own socket,
#    the local view has no other row, and the local totals grow by exactly
#    the client's own bytes, not by the 20 MB each way that its backend
#    moved through libpq: the inner connection is counted nowhere on the
#    local side;
#  - the far backend serving the inner connection (found by its
#    application_name) is counted, exact against its kernel socket, with
#    at least 20 MB each way, and rotated in both directions about once
#    per 64 kB (TLS 1.2: renegotiations, each counted both ways);
#  - the data arrives intact: the checksum of the rows generated on the
#    local side, stored on the far side, and read back through the inner
#    connection agree;
#  - ssl_renegotiate_rekey(pid) of the far backend, called from another far
#    session in the middle of a transfer each way through each of them,
#    rotates both directions (those inner connections set byte_limit = 0
#    in their startup options, so only the request rotates): the client's
#    key once, the far side's once, or on TLS 1.3 while the far side sends
#    twice (a KeyUpdate at its send point, then the one that asks the
#    client for a new key, at its next inbound record); the transfer
#    completes intact.  "In the middle" is made certain by a gate: a
#    function in the transfer's query that waits, half way, for an
#    advisory lock the test holds (on the side whose query produces the
#    rows);
#  - neither server logs an error or a warning.
#
# The inner connections are closed by postgres_fdw_disconnect() and
# dblink_disconnect() (a Terminate message) before the client leaves: a
# backend that exits with libpq connections open just drops them, and the
# far side would log an EOF.
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $LIMIT = 64 * 1024;
my $FLOOR = 20 * 1024 * 1024;    # bytes each way through each connection

# Rows "i, repeat(md5(i), 32)": about 1 kB each, on the wire and back.
my $ROWS = 21_000;      # > 20 MB
my $GATED_ROWS = 3_000; # the rekey transfers: 3 MB, gated half way
my $BATCH = 50;         # rows per postgres_fdw batch / fetch, per dblink_exec
my $LOCK = 4242;        # the gate's advisory lock

# A key carries the limit plus what is in flight when it is crossed: a
# batch of rows (50 kB) and a send buffer.  4 x the limit is a sane upper
# bound for one key, and so bytes / (4 x 64 kB) a lower one for rotations.
my $KEY_BOUND = 4 * $LIMIT;

my $certs = make_certs();
my $conf =
  "ssl_renegotiate.byte_limit = 64kB\nssl_renegotiate.tls12 = renegotiate\n";
# not the 20 MB of dblink's INSERT statements in the far log
my $far = new_tls_node(
	'far',
	certs => $certs,
	conf => "$conf\nlog_statement = none\n");
my $local = new_tls_node('local', certs => $certs, conf => $conf);
$far->start;
$local->start;

my $gate_sql = qq{
CREATE FUNCTION gate(i int, at int) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
	IF i = at THEN
		PERFORM pg_advisory_lock($LOCK);
		PERFORM pg_advisory_unlock($LOCK);
	END IF;
	RETURN '';
END \$\$;
};
$far->safe_psql('postgres', "CREATE EXTENSION ssl_renegotiate; $gate_sql");
$local->safe_psql('postgres',
	"CREATE EXTENSION ssl_renegotiate; CREATE EXTENSION postgres_fdw; CREATE EXTENSION dblink; $gate_sql"
);
$far->safe_psql('postgres',
	"CREATE VIEW gen_gated AS SELECT i, gate(i, $GATED_ROWS / 2) || repeat(md5(i::text), 32) AS s "
	  . "FROM generate_series(1, $GATED_ROWS) i");

# ---------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------

# "count md5" of the rows (i int, s text) of $from, in the order of i.
sub rows_md5_sql
{
	my ($from) = @_;
	return
	  "SELECT count(*) || ' ' || md5(string_agg(i || ':' || s, ',' ORDER BY i)) FROM $from";
}

sub generated_from
{
	my ($rows) = @_;
	return
	  "(SELECT i, repeat(md5(i::text), 32) AS s FROM generate_series(1, $rows) i) g";
}

my %expected = map {
	$_ => $local->safe_psql('postgres', rows_md5_sql(generated_from($_)))
} ($ROWS, $GATED_ROWS);

# The inner connection string to "far" (SslrTest::tls_connstr), for dblink,
# and as postgres_fdw server options.
sub inner_connstr
{
	my ($tls, $app, $options) = @_;
	return tls_connstr(
		$far,
		(   $tls eq '1.2'
			? (ssl_max_protocol_version => 'TLSv1.2')
			: (tls => '1.3')),
		sslmode => 'verify-ca',
		sslrootcert => $certs->{ca_crt},
		application_name => $app,
		(defined $options ? (extra => "options='$options'") : ()));
}

sub fdw_options
{
	my ($connstr) = @_;
	my @opts;
	while ($connstr =~ /(\w+)=('(?:[^'\\]|\\.)*'|\S+)/g)
	{
		my ($k, $v) = ($1, $2);
		$v =~ s/^'(.*)'$/$1/s and $v =~ s/\\(.)/$1/g;
		$v =~ s/'/''/g;
		push @opts, "$k '$v'";
	}
	return join(', ', @opts, "batch_size '$BATCH'", "fetch_size '$BATCH'");
}

# The startup options of the rekey cases' inner connections: only the
# operator's request rotates, and each rotation is logged.
my $REKEY_ONLY =
  '-c ssl_renegotiate.byte_limit=0 -c ssl_renegotiate.log_rekeys=on';

# Per TLS version: a foreign server and a dblink connection at 64 kB, and
# one each for the rekey cases.  Far tables: one per connection.
my %conn;
for my $tls ('1.3', '1.2')
{
	(my $v = $tls) =~ s/\.//;
	for my $kind ('main', 'rk')
	{
		for my $tool ('fdw', 'dblink')
		{
			my $name = "${kind}_${tool}_$v";
			my $connstr = inner_connstr($tls, "sslr_$name",
				$kind eq 'rk' ? $REKEY_ONLY : undef);
			$conn{$name} = {
				name => $name,
				tool => $tool,
				tls => $tls,
				connstr => $connstr,
				table => "t_$name"
			};
			$far->safe_psql('postgres',
				"CREATE TABLE t_$name (i int, s text)");
			next unless $tool eq 'fdw';
			$local->safe_psql(
				'postgres', qq{
CREATE SERVER $name FOREIGN DATA WRAPPER postgres_fdw OPTIONS (${\ fdw_options($connstr)});
CREATE USER MAPPING FOR PUBLIC SERVER $name;
CREATE FOREIGN TABLE ft_$name (i int, s text) SERVER $name OPTIONS (table_name 't_$name');
CREATE FOREIGN TABLE ftg_$name (i int, s text) SERVER $name OPTIONS (table_name 'gen_gated');
});
		}
	}
}

# The client: psql over TLS 1.3 to "local", the only TLS session there.
my $client = background_tls_psql($local, tls_connstr($local, tls => '1.3'));
my $cpid = $client->query_safe('SELECT pg_backend_pid()');

# The local client's row against the kernel, and against the local totals
# (which, the client being the only TLS session, must grow by exactly its
# bytes).  Returns (row, totals).
sub check_client
{
	my ($what, $c0, $t0) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok(wait_idle($local, $cpid), "$what: local client idle, socket quiet");
	my ($krcv, $ksent) = kernel_tls_counts($local, $cpid);
	my $c1 = activity_row($local, $cpid);
	my $t1 = totals_row($local);
	is( "$c1->{bytes_received} $c1->{bytes_sent}",
		"$krcv $ksent",
		"$what: local client row = kernel counts of its socket (received, sent)"
	);
	is( $local->safe_psql(
			'postgres',
			'SELECT string_agg(pid::text, \',\') FROM ssl_renegotiate_activity'
		),
		$cpid,
		"$what: the local view has the client's row only");

	if (defined $c0)
	{
		my @d = map { $c1->{$_} - $c0->{$_} } qw(bytes_received bytes_sent);
		is( join(' ',
				map { $t1->{$_} - $t0->{$_} } qw(bytes_received bytes_sent)),
			"@d",
			"$what: local totals grew by the client's own bytes (@d)");
		cmp_ok($d[0] + $d[1], '<', $LIMIT,
			"$what: the client's own bytes are a few queries' worth, not the inner connection's"
		);
		is($t1->{connections}, $t0->{connections},
			"$what: local totals: no connection added");
	}
	return ($c1, $t1);
}

# The far backend of an inner connection, by its application_name.
sub far_pid
{
	my ($c) = @_;
	my $pid = $far->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'sslr_$c->{name}'"
	);
	like($pid, qr/^\d+$/,
		"$c->{name}: far backend found by application_name");
	return $pid;
}

# The far row, settled, checked against the far backend's kernel socket.
sub far_row
{
	my ($c, $pid, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok(wait_idle($far, $pid), "$what: far backend idle, socket quiet");
	my ($krcv, $ksent) = kernel_tls_counts($far, $pid);
	my $r = activity_row($far, $pid);
	is( "$r->{bytes_received} $r->{bytes_sent}",
		"$krcv $ksent",
		"$what: far row = kernel counts of the far backend's socket");
	return $r;
}

sub sql_literal
{
	my ($v) = @_;
	$v =~ s/'/''/g;
	return "'$v'";
}

sub connect_sql
{
	my ($c) = @_;
	return $c->{tool} eq 'fdw'
	  ? ping_sql($c)
	  : "SELECT dblink_connect('$c->{name}', "
	  . sql_literal($c->{connstr}) . ')';
}

# One small statement through the inner connection.
sub ping_sql
{
	my ($c) = @_;
	return $c->{tool} eq 'fdw'
	  ? "SELECT count(*) FROM ft_$c->{name}"
	  : "SELECT * FROM dblink('$c->{name}', 'SELECT 1') AS x(one int)";
}

sub disconnect_sql
{
	my ($c) = @_;
	return $c->{tool} eq 'fdw'
	  ? "SELECT postgres_fdw_disconnect('$c->{name}')"
	  : "SELECT dblink_disconnect('$c->{name}')";
}

# Local to far: $rows rows into the far table, gated at row (or, for dblink,
# statement) $gate if given.  The result is the number of statements
# dblink_exec ran, or nothing.
sub push_sql
{
	my ($c, $rows, $gate) = @_;
	if ($c->{tool} eq 'fdw')
	{
		my $g = defined $gate ? "gate(i, $gate) || " : '';
		return
		  "INSERT INTO ft_$c->{name} SELECT i, ${g}repeat(md5(i::text), 32) "
		  . "FROM generate_series(1, $rows) i";
	}
	my $g = defined $gate ? "gate(g, $gate / $BATCH) || " : '';
	# the chunks in order, so that the gate is half way
	return
		"SELECT count(*) FROM (SELECT (i - 1) / $BATCH AS g, "
	  . "string_agg(format('(%s,%L)', i, repeat(md5(i::text), 32)), ',') AS v "
	  . "FROM generate_series(1, $rows) i GROUP BY 1 ORDER BY 1 OFFSET 0) chunks "
	  . "WHERE dblink_exec('$c->{name}', ${g}'INSERT INTO $c->{table} VALUES ' || v) = 'INSERT 0 $BATCH'";
}

# Far to local: the checksum of the far table (or the gated view), computed
# on the local side from the rows read through the inner connection.  OFFSET
# 0 keeps postgres_fdw from pushing the aggregate down.
sub fetch_sql
{
	my ($c, $gated) = @_;
	if ($c->{tool} eq 'fdw')
	{
		my $ft = ($gated ? 'ftg_' : 'ft_') . $c->{name};
		return rows_md5_sql("(SELECT * FROM $ft OFFSET 0) x");
	}
	my $src = $gated ? 'gen_gated' : $c->{table};
	return rows_md5_sql(
		"dblink('$c->{name}', 'SELECT i, s FROM $src') AS x(i int, s text)");
}

# Rotations of one phase: the direction that moved the data rotated about
# once per 64 kB; no direction rotated more than the traffic allows.
sub check_rotations
{
	my ($what, $r0, $r1, $dir) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my %d = map { $_ => $r1->{$_} - $r0->{$_} }
	  qw(bytes_sent bytes_received rekeys_sent rekeys_received);
	my ($bytes, $rekeys) =
	  $dir eq 'sent'
	  ? ($d{bytes_sent}, $d{rekeys_sent})
	  : ($d{bytes_received}, $d{rekeys_received});
	note
	  "$what: far sent $d{bytes_sent} / received $d{bytes_received} bytes, "
	  . "rekeys_sent +$d{rekeys_sent}, rekeys_received +$d{rekeys_received}, "
	  . "max_sent_per_key $r1->{max_sent_per_key}, max_received_per_key $r1->{max_received_per_key}";
	cmp_ok($bytes, '>=', $FLOOR, "$what: far bytes_$dir grew by >= 20 MB");
	cmp_ok(
		$rekeys, '>=',
		int($bytes / $KEY_BOUND),
		"$what: far rekeys_$dir >= bytes / (4 x 64 kB)");
	my $most = int(($d{bytes_sent} + $d{bytes_received}) / $LIMIT) + 2;
	cmp_ok($d{$_}, '<=', $most, "$what: far $_ <= all bytes / 64 kB + 2")
	  for qw(rekeys_sent rekeys_received);
	return;
}

# ---------------------------------------------------------------------
# 1. 20 MB each way through each connection at 64 kB
# ---------------------------------------------------------------------
my ($c0, $t0) = check_client('start');
my ($cstart, $tstart) = ($c0, $t0);
for my $name (qw(main_fdw_13 main_dblink_13 main_fdw_12 main_dblink_12))
{
	my $c = $conn{$name};
	$client->query_safe(connect_sql($c));
	my $pid = far_pid($c);
	is( $far->safe_psql(
			'postgres', "SELECT version FROM pg_stat_ssl WHERE pid = $pid"),
		"TLSv$c->{tls}",
		"$name: inner connection uses TLS $c->{tls}");
	my $r0 = far_row($c, $pid, "$name: connected");

	my $pushed = $client->query_safe(push_sql($c, $ROWS));
	is( $pushed,
		$c->{tool} eq 'fdw' ? '' : $ROWS / $BATCH,
		"$name: push: every statement inserted its rows");
	my $r1 = far_row($c, $pid, "$name: after push");
	is($far->safe_psql('postgres', rows_md5_sql($c->{table})),
		$expected{$ROWS},
		"$name: far table = the rows generated locally (checksum)");
	check_rotations("$name: push", $r0, $r1, 'received');

	is($client->query_safe(fetch_sql($c, 0)),
		$expected{$ROWS},
		"$name: rows read back through the inner connection (checksum)");
	my $r2 = far_row($c, $pid, "$name: after fetch");
	check_rotations("$name: fetch", $r1, $r2, 'sent');

	is($r2->{rekey_failures}, 0, "$name: no rekey failures");
	is($r2->{rekeys_skipped}, 0, "$name: no rekeys skipped");
	is($r2->{rekeys_received},
		$r2->{rekeys_sent},
		"$name: TLS 1.2: each renegotiation counted in both directions")
	  if $c->{tls} eq '1.2';
	cmp_ok($r2->{$_}, '<=', $KEY_BOUND, "$name: $_ <= 4 x 64 kB")
	  for qw(max_sent_per_key max_received_per_key);

	$client->query_safe(disconnect_sql($c));
	($c0, $t0) = check_client($name, $c0, $t0);
}

# ---------------------------------------------------------------------
# 2. ssl_renegotiate_rekey(far pid) in the middle of a transfer
# ---------------------------------------------------------------------
my %holder = (
	local => $local->background_psql('postgres'),
	far => $far->background_psql('postgres'));

for my $name (qw(rk_fdw_13 rk_dblink_13 rk_fdw_12 rk_dblink_12))
{
	my $c = $conn{$name};
	$client->query_safe(connect_sql($c));
	my $pid = far_pid($c);

	for my $dir ('push', 'fetch')
	{
		my $what = "$name: rekey mid-$dir";
		# the rows are produced where the gate waits
		my ($gnode, $gside) =
		  $dir eq 'push' ? ($local, 'local') : ($far, 'far');
		my $sql =
		  $dir eq 'push'
		  ? push_sql($c, $GATED_ROWS, $GATED_ROWS / 2)
		  : fetch_sql($c, 1);
		my $before = far_row($c, $pid, "$what: before");
		my $log = -s $far->logfile;

		$holder{$gside}->query_safe("SELECT pg_advisory_lock($LOCK)");
		$client->query_until(qr/gated\n/, "\\echo gated\n$sql;\n");
		ok( $gnode->poll_query_until(
				'postgres',
				"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $LOCK AND NOT granted"
			),
			"$what: the transfer waits at the gate ($gside side)");

		my $r0 = activity_row($far, $pid);
		my $moved = $dir eq 'push' ? 'bytes_received' : 'bytes_sent';
		cmp_ok(
			$r0->{$moved} - $before->{$moved},
			'>=',
			$GATED_ROWS * 1024 / 2 - 64 * 1024,
			"$what: half the rows went through before the request");
		is( $far->safe_psql('postgres', "SELECT ssl_renegotiate_rekey($pid)"),
			't',
			"$what: ssl_renegotiate_rekey returns true");
		my $p = activity_row($far, $pid);
		is( "$p->{rekey_requested} $p->{rekeys_sent} $p->{rekeys_received}",
			"1 $r0->{rekeys_sent} $r0->{rekeys_received}",
			"$what: the request is pending, nothing rotated before the next I/O"
		);

		$holder{$gside}->query_safe("SELECT pg_advisory_unlock($LOCK)");
		my $out = $client->query_safe("SELECT 'done'");
		# The far side asks the client for a new key at its first inbound
		# record after the request, and the client answers with its next
		# write: after a fetch the client may have written nothing since
		# the request, so two small statements.
		$client->query_safe(ping_sql($c)) for 1 .. 2;
		my $r1 = far_row($c, $pid, "$what: after");
		if ($dir eq 'push')
		{
			is( $out,
				($c->{tool} eq 'fdw' ? '' : $GATED_ROWS / $BATCH . "\n")
				  . 'done',
				"$what: the transfer completed");
			is( $far->safe_psql('postgres', rows_md5_sql($c->{table})),
				$expected{$GATED_ROWS},
				"$what: far table = the rows generated locally (checksum)");
		}
		else
		{
			is($out, "$expected{$GATED_ROWS}\ndone",
				"$what: the transfer completed, rows read back intact (checksum)"
			);
		}
		note
		  "$what: far row before the request: $moved $r0->{$moved}; after the transfer: "
		  . "$moved $r1->{$moved}, rekeys_sent $r1->{rekeys_sent}, rekeys_received $r1->{rekeys_received}";
		cmp_ok(
			$r1->{$moved} - $r0->{$moved},
			'>=',
			$GATED_ROWS * 1024 / 2,
			"$what: the other half went through after the request");
		# TLS 1.3 while the far side sends: its send point rotates its key
		# (KeyUpdate, not requested), then its next inbound record asks the
		# client (a requested KeyUpdate, which rotates the sending key again)
		my $sent = $c->{tls} eq '1.3' && $dir eq 'fetch' ? 2 : 1;
		is( join(' ',
				map { $r1->{$_} - $r0->{$_} }
				  qw(rekeys_sent rekeys_received rekey_requests)),
			"$sent 1 1",
			"$what: one request: rekeys_sent +$sent, rekeys_received +1");
		is($r1->{rekey_requested}, 0, "$what: nothing left pending");
		is($r1->{rekey_failures}, 0, "$what: no rekey failures");
		my $l = slurp_file($far->logfile, $log);
		like(
			$l,
			qr/pid $pid was asked to rotate its keys \(request \d+\)/,
			"$what: the request is logged");
		like(
			$l,
			qr/rotated the sending key of pid $pid after/,
			"$what: the rotation is logged");
	}
	$client->query_safe(disconnect_sql($c));
}
$_->quit for values %holder;
check_client('after the rekey cases', $c0, $t0);

note "local client over the whole run: received "
  . ($c0->{bytes_received} - $cstart->{bytes_received})
  . ", sent "
  . ($c0->{bytes_sent} - $cstart->{bytes_sent});
$client->quit;

# The far side counts each inner connection as one of its TLS sessions.
is( totals_row($far)->{connections},
	scalar(keys %conn),
	'far totals: one connection per inner connection');

# ---------------------------------------------------------------------
# 3. the logs
# ---------------------------------------------------------------------
my $bad =
  qr/^.*(?:WARNING|ERROR|FATAL|PANIC|SSL error|SSL SYSCALL|could not (?:send|receive) data|unexpected EOF|server process|terminated by signal).*$/m;
for my $node ($local, $far)
{
	my @lines = slurp_file($node->logfile) =~ /$bad/g;
	is(join("\n", @lines),
		'', $node->name . ' log: no error, warning or connection trouble');
}

$local->stop;
$far->stop;
done_testing();
