
# Copyright (c) 2026, ssl_renegotiate developers
#
# monitoring/: the metrics Debian's prometheus-postgres-exporter scrapes
# with monitoring/queries.yaml, and the alert rules of
# monitoring/alerts.yml.
#
# The real exporter (/usr/bin/prometheus-postgres-exporter) runs on a free
# loopback port, as a role that is a member of pg_monitor, connected over
# the node's Unix socket: the extension counts TLS connections only, so
# the exporter's own connection moves no counter.  TLS traffic at
# byte_limit = 64kB:
#
#   A  TLS 1.3: a COPY TO that rotates the server's key; then idle
#   W  TLS 1.2 under a role with tls12 = warn: a COPY TO past the limit,
#      rotations skipped; then idle
#   T  TLS 1.2 under tls12 = terminate: ended by the extension mid-COPY
#   R  TLS 1.3, idle, with an ssl_renegotiate_rekey() request waiting for
#      its next I/O
#   P  TLS 1.3, a COPY FROM STDIN left open: libpq reads only when its own
#      write blocks, so the server's key update request stays pending
#
# Once every counter has settled, /metrics is scraped over HTTP and each
# ssl_renegotiate_* series must equal what the views (read over the Unix
# socket just before and just after, unchanged) say: the totals, the
# totals per database and role (labels datname and usename), the live
# connections' largest keys and states, pg_stat_ssl's versions, the
# settings.  Checked three times: ssl_renegotiate.interval off (nothing
# past it), the interval at 1s (P, busy, is past it), and after every
# session has ended.  Then promtool lints the scraped names and checks and
# unit-tests the alert rules.
#
# The exporter runs with --disable-default-metrics,
# --disable-settings-metrics, --no-collector.database and
# --no-collector.bgwriter: only our queries, so pg_exporter_last_scrape_error
# speaks about them alone (0.11.1's built-in queries read catalog columns
# that PostgreSQL 17 moved, e.g. pg_stat_bgwriter's checkpoint counts).

use strict;
use warnings FATAL => 'all';

use File::Basename qw(dirname);
use File::Spec;
use HTTP::Tiny;
use IPC::Run;
use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SslrTest;

my $EXPORTER = '/usr/bin/prometheus-postgres-exporter';
my $PROMTOOL = '/usr/bin/promtool';
my $MONITORING =
  File::Spec->rel2abs(dirname(__FILE__) . '/../monitoring');
my $LIMIT = 65536;    # ssl_renegotiate.byte_limit = 64kB, in bytes

# Installed by scripts/setup.sh (prometheus-postgres-exporter, prometheus):
# never skipped.
-x $_ or die "$_ is missing: scripts/setup.sh installs it"
  for $EXPORTER, $PROMTOOL;

my $node = new_tls_node(
	'primary',
	conf => "ssl_renegotiate.byte_limit = '64kB'\n"
	  . "ssl_renegotiate.tls12 = terminate\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION ssl_renegotiate;
	CREATE ROLE regress_exporter LOGIN IN ROLE pg_monitor;
	CREATE ROLE regress_tls12_warn LOGIN;
	ALTER ROLE regress_tls12_warn SET ssl_renegotiate.tls12 = 'warn';
	CREATE TABLE copy_in (i int, s text);
});

# ---------------------------------------------------------------------
# the exporter
# ---------------------------------------------------------------------
my $http_port = PostgreSQL::Test::Cluster::get_free_port();
my $url = "http://127.0.0.1:$http_port/metrics";
my $exporter_log =
  "$PostgreSQL::Test::Utils::log_path/050_exporter_prometheus-postgres-exporter.log";
my $exporter;
{
	local $ENV{DATA_SOURCE_NAME} =
	    'host=' . $node->host
	  . ' port=' . $node->port
	  . ' user=regress_exporter dbname=postgres sslmode=disable';
	$exporter = IPC::Run::start(
		[
			$EXPORTER,
			"--web.listen-address=127.0.0.1:$http_port",
			"--extend.query-path=$MONITORING/queries.yaml",
			'--disable-default-metrics',
			'--disable-settings-metrics',
			'--no-collector.database',
			'--no-collector.bgwriter',
		],
		'<', \undef, '>', $exporter_log, '2>&1');
}
END { $exporter->kill_kill(grace => 5) if $exporter; }

# never through a proxy of the environment
my $http = HTTP::Tiny->new(timeout => 30, proxy => undef, http_proxy => undef);

# GET /metrics: a hashref "name{label=value,...}" => value (labels sorted,
# without the exporter's "server" label, the same for every series), and
# the text.
sub scrape
{
	my $r = $http->get($url);
	die "GET $url: $r->{status} $r->{reason}\n$r->{content}"
	  unless $r->{success};
	my %m;
	for my $line (split /\n/, $r->{content})
	{
		next if $line =~ /^#/ || $line !~ /\S/;
		$line =~ /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/
		  or die "unparsable line in /metrics: $line";
		my ($name, $labels, $value) = ($1, $2 // '', $3);
		my %l = $labels =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
		delete $l{server};
		my $key = $name;
		$key .= '{' . join(',', map { "$_=$l{$_}" } sort keys %l) . '}'
		  if %l;
		$m{$key} = $value;
	}
	return (\%m, $r->{content});
}

my $up = 0;
for (my $i = 0; $i < 10 * $PostgreSQL::Test::Utils::timeout_default; $i++)
{
	my $r = $http->get($url);
	$up = $r->{success} && $r->{content} =~ /^pg_up 1$/m;
	last if $up || !$exporter->pumpable;
	usleep(100_000);
}
ok($up, 'the exporter answers on 127.0.0.1 and reaches the server')
  or diag(slurp_file($exporter_log));

# ---------------------------------------------------------------------
# what the views say, read as the superuser over the Unix socket
# ---------------------------------------------------------------------
sub json_rows
{
	my ($sql) = @_;
	return JSON::PP::decode_json($node->safe_psql('postgres',
		"SELECT coalesce(json_agg(x), '[]') FROM ($sql) x"));
}

# The series the exporter must show, from the views and pg_settings.
sub expected
{
	my $t = totals_row($node);
	my %e = (
		ssl_renegotiate_connections_total            => $t->{connections},
		ssl_renegotiate_terminations_total           => $t->{terminations},
		ssl_renegotiate_rotation_failures_total      => $t->{rekey_failures},
		ssl_renegotiate_rotations_skipped_total      => $t->{rekeys_skipped},
		ssl_renegotiate_renegotiations_refused_total =>
		  $t->{renegotiations_refused},
		ssl_renegotiate_rotation_seconds_total => $t->{rekey_time} / 1000,
		ssl_renegotiate_stats_reset_timestamp_seconds => $node->safe_psql(
			'postgres',
			'SELECT extract(epoch FROM stats_reset) FROM ssl_renegotiate_totals'
		),);
	for my $dir ('sent', 'received')
	{
		$e{"ssl_renegotiate_traffic_bytes_total{direction=$dir}"} =
		  $t->{"bytes_$dir"};
		$e{"ssl_renegotiate_traffic_records_total{direction=$dir}"} =
		  $t->{"records_$dir"};
		$e{"ssl_renegotiate_traffic_key_rotations_total{direction=$dir}"} =
		  $t->{"rekeys_$dir"};
	}

	for my $r (
		@{
			json_rows(
				q{SELECT coalesce(datname, nullif(dbid, 0::oid)::text, '') AS datname,
				         coalesce(usename, userid::text) AS usename, connections,
				         terminations, rekey_failures, bytes_sent, bytes_received,
				         records_sent, records_received, rekeys_sent, rekeys_received
				  FROM ssl_renegotiate_database_role_totals})
		})
	{
		my $l = "datname=$r->{datname}";
		my $u = "usename=$r->{usename}";
		$e{"ssl_renegotiate_database_role_connections_total{$l,$u}"} =
		  $r->{connections};
		$e{"ssl_renegotiate_database_role_terminations_total{$l,$u}"} =
		  $r->{terminations};
		$e{"ssl_renegotiate_database_role_rotation_failures_total{$l,$u}"} =
		  $r->{rekey_failures};
		for my $dir ('sent', 'received')
		{
			my $k = "{$l,direction=$dir,$u}";
			$e{"ssl_renegotiate_database_role_traffic_bytes_total$k"} =
			  $r->{"bytes_$dir"};
			$e{"ssl_renegotiate_database_role_traffic_records_total$k"} =
			  $r->{"records_$dir"};
			$e{"ssl_renegotiate_database_role_traffic_key_rotations_total$k"} =
			  $r->{"rekeys_$dir"};
		}
	}

	my %setting = map { $_->{name} => $_ } @{
		json_rows(
			q{SELECT name, setting, unit FROM pg_settings WHERE name LIKE 'ssl_renegotiate.%'}
		) };
	for my $name ('byte_limit', 'hard_limit')
	{
		my $s = $setting{"ssl_renegotiate.$name"};
		die "unit of $name is $s->{unit}" unless $s->{unit} eq 'kB';
		$e{"ssl_renegotiate_setting_${name}_bytes"} = $s->{setting} * 1024;
	}
	my $interval = $setting{'ssl_renegotiate.interval'};
	die "unit of interval is $interval->{unit}" unless $interval->{unit} eq 's';
	$e{ssl_renegotiate_setting_interval_seconds} = $interval->{setting};

	my $live = json_rows(
		q{SELECT r.sent_since_rekey, r.received_since_rekey, r.rekey_pending,
		         r.rekey_requested, a.state,
		         extract(epoch FROM now() - coalesce(r.last_rekey, a.backend_start)) AS key_age
		  FROM ssl_renegotiate_activity r LEFT JOIN pg_stat_activity a USING (pid)});
	my %max = (sent => 0, received => 0);
	my ($pending, $requested, $past) = (0, 0, 0);
	for my $r (@$live)
	{
		for my $dir ('sent', 'received')
		{
			$max{$dir} = $r->{"${dir}_since_rekey"}
			  if $r->{"${dir}_since_rekey"} > $max{$dir};
		}
		$pending++   if $r->{rekey_pending};
		$requested++ if $r->{rekey_requested};
		$past++
		  if $interval->{setting} > 0
		  && ($r->{state} // '') ne 'idle'
		  && $r->{key_age} > $interval->{setting};
	}
	$e{"ssl_renegotiate_current_key_max_bytes{direction=$_}"} = $max{$_}
	  for keys %max;
	$e{ssl_renegotiate_connections_rotation_pending}   = $pending;
	$e{ssl_renegotiate_connections_rotation_requested} = $requested;
	$e{ssl_renegotiate_connections_past_interval}      = $past;

	my %versions = ('TLSv1.2' => 0, 'TLSv1.3' => 0);
	$versions{ $_->{version} }++
	  for @{ json_rows('SELECT version FROM pg_stat_ssl WHERE ssl') };
	$e{"ssl_renegotiate_tls_connections{version=$_}"} = $versions{$_}
	  for keys %versions;
	return \%e;
}

# Scrape between two readings of the views; they must agree with each
# other (nothing moved) and with every ssl_renegotiate_* series, which
# must be exactly those expected.  Returns the scraped series.
sub check_scrape
{
	my ($what) = @_;
	my $before = expected();
	my ($m, $text) = scrape();
	my $after = expected();
	is_deeply($after, $before, "$what: the views did not move during the scrape");
	note "$what: /metrics:\n"
	  . join("\n", grep { /^ssl_renegotiate_/ } split /\n/, $text);

	is_deeply(
		[ sort grep { /^ssl_renegotiate_/ } keys %$m ],
		[ sort keys %$after ],
		"$what: the exporter shows every expected ssl_renegotiate series, no other");
	for my $key (sort keys %$after)
	{
		next unless defined $m->{$key};
		cmp_ok($m->{$key}, '==', $after->{$key}, "$what: $key = $after->{$key}");
	}
	is($m->{pg_up}, 1, "$what: pg_up 1");
	is($m->{pg_exporter_last_scrape_error},
		0, "$what: no query failed (pg_exporter_last_scrape_error 0)");
	my @load = grep { /^pg_exporter_user_queries_load_error\{/ } keys %$m;
	is(scalar(@load), 1, "$what: one queries file");
	like($load[0] // '', qr/filename=\Q$MONITORING\E\/queries\.yaml,/,
		"$what: ... ours");
	is($m->{ $load[0] // '' }, 0,
		"$what: queries.yaml loaded (pg_exporter_user_queries_load_error 0)");
	return ($m, $text);
}

# ---------------------------------------------------------------------
# traffic
# ---------------------------------------------------------------------
my $copy_to = sub {
	my ($rows) = @_;
	return "\\copy (SELECT i, repeat('x', 1000) FROM generate_series(1, $rows) i) to '/dev/null'";
};

# A: TLS 1.3, COPY TO of 2 MB: the server's key rotates every ~64 kB
my $copier = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $copier_pid = $copier->query_safe('SELECT pg_backend_pid()');
$copier->query_safe($copy_to->(2000));
ok(wait_idle($node, $copier_pid), 'A: idle after its COPY TO');

# W: TLS 1.2, tls12 = warn for its role: limits reached, not rotated
my $warned = background_tls_psql($node,
	tls_connstr($node, tls => '1.2', user => 'regress_tls12_warn'));
my $warned_pid = $warned->query_safe('SELECT pg_backend_pid()');
$warned->query_safe($copy_to->(200));
ok(wait_idle($node, $warned_pid), 'W: idle after its COPY TO');

# T: TLS 1.2 under tls12 = terminate: ended at the limit
{
	my ($out, $err) = ('', '');
	my $ret = $node->psql(
		'postgres',
		"SELECT pg_backend_pid();\n" . $copy_to->(200),
		connstr => tls_connstr($node, tls => '1.2'),
		stdout  => \$out,
		stderr  => \$err);
	isnt($ret, 0, 'T: psql failed');
	like(
		$err,
		qr/FATAL:  terminating connection because its TLS 1\.2 keys reached ssl_renegotiate\.byte_limit/,
		'T: ended by the extension');
	my ($t_pid) = $out =~ /^(\d+)$/m;
	$node->poll_query_until('postgres',
		'SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = ' . ($t_pid // 0))
	  or die 'T: backend did not exit';
}

# R: TLS 1.3, idle, an operator's request waiting for its next I/O
my $requested = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $requested_pid = $requested->query_safe('SELECT pg_backend_pid()');
ok(wait_idle($node, $requested_pid), 'R: idle');
is($node->safe_psql('postgres', "SELECT ssl_renegotiate_rekey($requested_pid)"),
	't', 'R: ssl_renegotiate_rekey() accepted');

# P: TLS 1.3, COPY FROM STDIN with 300 kB sent and the copy left open
my $P_ROWS = 300;
my ($p_in, $p_out, $p_err) = ('', '', '');
my $p = IPC::Run::start(
	[
		'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
		'-d', tls_connstr($node, tls => '1.3', application_name => 'copy_in'),
		'-f', '-'
	],
	'<', \$p_in, '>', \$p_out, '2>', \$p_err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$p_in .= "COPY copy_in FROM STDIN;\n";
$p->pump while length $p_in;
# (psql's output to a pipe is not flushed: ask the server for its pid)
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity
	  WHERE application_name = 'copy_in' AND query LIKE 'COPY copy_in FROM STDIN%'})
  or die 'P: COPY FROM did not start';
my $p_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'copy_in'});
my $p_line = 'y' x 1000;
my $p_bytes = $P_ROWS * (length($p_line) + 5);    # "NNN\t" ... "\n"
$p_in .= join('', map { sprintf("%03d\t%s\n", $_, $p_line) } 1 .. $P_ROWS);

# Settled: psql has sent all it read but what it and libpq keep back (up
# to 8 kB each, until the copy ends), the server has read all that
# arrived, its counters stay put, and it waits for the client's new key.
{
	my ($last, $settled) = ('', 0);
	for (my $i = 0; $i < 10 * $PostgreSQL::Test::Utils::timeout_default; $i++)
	{
		$p->pump_nb;
		my $row  = activity_row($node, $p_pid);
		my $sock = kernel_socket_info($node, $p_pid);
		my $now  = join(' ', $row->{bytes_received}, $row->{bytes_sent},
			$row->{rekey_pending} ? 1 : 0);
		$settled =
			 $row->{rekey_pending}
		  && $row->{bytes_received} >= $p_bytes - 2 * 8192
		  && $sock
		  && $sock->{recv_q} == 0
		  && $sock->{send_q} == 0
		  && $now eq $last;
		last if $settled;
		$last = $now;
		usleep(200_000);
	}
	ok($settled, 'P: COPY FROM open, counters settled, key update pending');
}

# ---------------------------------------------------------------------
# 1. interval off
# ---------------------------------------------------------------------
my ($m) = check_scrape('interval off');
cmp_ok($m->{'ssl_renegotiate_traffic_key_rotations_total{direction=sent}'},
	'>', 0, 'interval off: the COPY TO rotated the server\'s key');
is($m->{ssl_renegotiate_terminations_total}, 1, 'interval off: T counted as terminated');
cmp_ok($m->{ssl_renegotiate_rotations_skipped_total},
	'>=', 1, 'interval off: W\'s skipped rotations counted');
is($m->{ssl_renegotiate_connections_total}, 5,
	'interval off: 5 TLS connections, the exporter\'s own not among them');
is($m->{ssl_renegotiate_connections_rotation_pending}, 1, 'interval off: P pending');
is($m->{ssl_renegotiate_connections_rotation_requested},
	1, 'interval off: R requested');
is($m->{ssl_renegotiate_connections_past_interval},
	0, 'interval off: no connection past the interval');
cmp_ok($m->{'ssl_renegotiate_current_key_max_bytes{direction=received}'},
	'>', $LIMIT, 'interval off: P\'s key carried more than the limit');
is($m->{'ssl_renegotiate_tls_connections{version=TLSv1.3}'},
	3, 'interval off: A, R and P on TLS 1.3');
is($m->{'ssl_renegotiate_tls_connections{version=TLSv1.2}'},
	1, 'interval off: W on TLS 1.2');
is($m->{ssl_renegotiate_setting_byte_limit_bytes},
	$LIMIT, 'interval off: byte_limit in bytes');
is($m->{'ssl_renegotiate_database_role_connections_total{datname=postgres,usename=postgres}'},
	4, 'interval off: A, T, R and P under postgres/postgres');
is($m->{'ssl_renegotiate_database_role_connections_total{datname=postgres,usename=regress_tls12_warn}'},
	1, 'interval off: W under its own role');
is($m->{'ssl_renegotiate_database_role_terminations_total{datname=postgres,usename=postgres}'},
	1, 'interval off: T terminated, under postgres/postgres');

# ---------------------------------------------------------------------
# 2. interval = 1s: P is busy and its key is older
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	"ALTER SYSTEM SET ssl_renegotiate.interval = '1s'; SELECT pg_reload_conf()");
$node->poll_query_until(
	'postgres', qq{
	SELECT current_setting('ssl_renegotiate.interval') = '1s'
	   AND now() - coalesce(r.last_rekey, a.backend_start) > '1s'
	FROM ssl_renegotiate_activity r JOIN pg_stat_activity a USING (pid)
	WHERE pid = $p_pid})
  or die 'P: its key never got older than the interval';
($m) = check_scrape('interval 1s');
is($m->{ssl_renegotiate_connections_past_interval},
	1, 'interval 1s: P, not idle, is past the interval; idle A, R, W are not');
is($m->{ssl_renegotiate_setting_interval_seconds}, 1, 'interval 1s: in seconds');

# ---------------------------------------------------------------------
# 3. every session ended: its traffic is in the totals
# ---------------------------------------------------------------------
$p_in .= "\\.\n";
$p->finish;
is($p_err, '', 'P: COPY FROM completed without error');
is($node->safe_psql('postgres', 'SELECT count(*) FROM copy_in'),
	$P_ROWS, 'P: every row stored');
$_->quit for $copier, $warned, $requested;
$node->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM ssl_renegotiate_activity')
  or die 'TLS sessions did not end';
my $text;
($m, $text) = check_scrape('all ended');
is($m->{ssl_renegotiate_connections_total}, 5, 'all ended: 5 connections');
cmp_ok($m->{'ssl_renegotiate_database_role_traffic_bytes_total{datname=postgres,direction=sent,usename=postgres}'},
	'>', 2_000_000, 'all ended: A\'s 2 MB COPY TO under postgres/postgres');
is($m->{'ssl_renegotiate_tls_connections{version=TLSv1.3}'},
	0, 'all ended: no TLS 1.3 connection');

# ---------------------------------------------------------------------
# promtool: the scraped names, the rules and their unit tests
# ---------------------------------------------------------------------
sub promtool
{
	my ($stdin, @args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $PROMTOOL, @args ],
		'<', \$stdin, '>', \$out, '2>', \$err);
	note "promtool @args:\n$out$err";
	return ($ok, "$out$err");
}

{
	my $ours = join('',
		map { "$_\n" } grep { /^(# (HELP|TYPE) )?ssl_renegotiate_/ } split /\n/,
		$text);
	my ($ok, $out) = promtool($ours, 'check', 'metrics');
	ok($ok && $out eq '',
		'promtool check metrics: the ssl_renegotiate series follow the naming conventions')
	  or diag($out);

	($ok, $out) = promtool('', 'check', 'rules', "$MONITORING/alerts.yml");
	ok($ok && $out =~ /SUCCESS: \d+ rules found/, 'promtool check rules: alerts.yml')
	  or diag($out);

	($ok, $out) = promtool('', 'test', 'rules', "$MONITORING/alerts_test.yml");
	ok($ok && $out =~ /SUCCESS/, 'promtool test rules: alerts_test.yml passes')
	  or diag($out);
}

$exporter->kill_kill(grace => 5);
undef $exporter;
$node->stop;
done_testing();
