
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
#   P  TLS 1.3 with its own interval (1s, in its connection's options, the
#      server's being off), a COPY FROM STDIN left open: libpq reads only
#      when its own write blocks, so the server's key update request stays
#      pending, and P is past its interval
#   S  TLS 1.3 with its own interval 1s: in pg_sleep, past its interval
#   C  TLS 1.2 under a role with tls12 = warn and interval = 1s: a COPY
#      FROM STDIN whose keys never rotate, past its interval; fed twice
#
# Once every counter has settled, /metrics is scraped over HTTP and each
# pg_ssl_renegotiate_* series must equal what the views (read over the
# Unix socket just before and just after, unchanged) say: the totals, the
# totals per database and role (labels datname and usename), the live
# connections' largest keys and states against each one's own limits in
# force, pg_stat_ssl's versions.  Checked four times: the server's
# ssl_renegotiate.interval off (C and P, in COPYs, are past their own
# interval; S, in pg_sleep, is not counted), after C sent more (the bytes
# under its old key grew), the server's interval at 1s after a reload
# (idle sessions keep what they enforce until their next command), and
# after every session has ended.  The
# exporter's settings collector shows the settings as
# pg_settings_ssl_renegotiate_*.  Every SQL block of the runbook
# (docs/monitoring.md)
# runs as the exporter's role.  P, its COPY ended, idles and is scraped
# twice: the bytes under keys awaiting rotation do not grow.
#
# Prometheus (/usr/bin/prometheus) runs too, from the start, scraping
# every second this exporter and a second one that reads two servers (the
# node over its socket in database postgres, and over 127.0.0.1 without
# TLS in database noext, where the extension is not): the recording and
# alert rules must all load and evaluate, show the traffic, and
# SslRenegotiateMetricsMissing be active for noext's server alone; every
# query of monitoring/grafana-dashboard.json (its variables at All) and
# its variables' label_values must return series.  Then promtool lints
# the scraped names and checks and unit-tests the alert and recording
# rules.
#
# The exporter runs with --disable-default-metrics, --no-collector.database
# and --no-collector.bgwriter: only our queries and pg_settings, so
# pg_exporter_last_scrape_error speaks about them alone (0.11.1's built-in
# queries read catalog columns that PostgreSQL 17 moved, e.g.
# pg_stat_bgwriter's checkpoint counts).

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
my $PROMETHEUS = '/usr/bin/prometheus';
my $MONITORING = File::Spec->rel2abs(dirname(__FILE__) . '/../../monitoring');
my $LIMIT = 65536;    # ssl_renegotiate.byte_limit = 64kB, in bytes

# An interval of 1s of its own, in a connection's options (a superuser's):
# the server's and the exporter's session's stay off.
my $own_interval = q{options='-c ssl_renegotiate.interval=1s'};

# Installed by scripts/setup.sh (prometheus-postgres-exporter, prometheus):
# never skipped.
-x $_
  or die "$_ is missing: scripts/setup.sh installs it"
  for $EXPORTER, $PROMTOOL, $PROMETHEUS;

my $node = new_tls_node('primary',
		conf => "ssl_renegotiate.byte_limit = '64kB'\n"
	  . "ssl_renegotiate.hard_limit = '1GB'\n"
	  . "ssl_renegotiate.tls12 = terminate\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION ssl_renegotiate;
	CREATE ROLE regress_exporter LOGIN IN ROLE pg_monitor;
	CREATE ROLE regress_tls12_warn LOGIN;
	ALTER ROLE regress_tls12_warn SET ssl_renegotiate.tls12 = 'warn';
	CREATE TABLE copy_in (i int, s text);
	CREATE ROLE regress_copy_past LOGIN;
	ALTER ROLE regress_copy_past SET ssl_renegotiate.tls12 = 'warn';
	ALTER ROLE regress_copy_past SET ssl_renegotiate.interval = '1s';
	GRANT INSERT ON copy_in TO regress_copy_past;
	CREATE DATABASE noext;
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
		'host='
	  . $node->host
	  . ' port='
	  . $node->port
	  . ' user=regress_exporter dbname=postgres sslmode=disable';
	$exporter = IPC::Run::start(
		[
			$EXPORTER,
			"--web.listen-address=127.0.0.1:$http_port",
			"--extend.query-path=$MONITORING/queries.yaml",
			'--disable-default-metrics',
			'--no-collector.database',
			'--no-collector.bgwriter',
		],
		'<',
		\undef,
		'>',
		$exporter_log,
		'2>&1');
}
END { $exporter->kill_kill(grace => 5) if $exporter; }

# never through a proxy of the environment
my $http =
  HTTP::Tiny->new(timeout => 30, proxy => undef, http_proxy => undef);

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
# a second exporter reading two servers, and Prometheus
# ---------------------------------------------------------------------
# The second exporter reads, as one exporter reads several servers
# (DATA_SOURCE_NAME with two DSNs; each series labelled server=host:port):
# the node over its socket, database postgres, where the extension is, and
# the node over 127.0.0.1 without TLS, database noext, where it is not
# (two server labels for one cluster).  Neither connection is TLS: no
# counter moves.
my $http_port2 = PostgreSQL::Test::Cluster::get_free_port();
my $exporter2;
{
	my $dsn =
	  'port=' . $node->port . ' user=regress_exporter sslmode=disable';
	local $ENV{DATA_SOURCE_NAME} =
		'host='
	  . $node->host
	  . " $dsn dbname=postgres,host=127.0.0.1 $dsn dbname=noext";
	$exporter2 = IPC::Run::start(
		[
			$EXPORTER,
			"--web.listen-address=127.0.0.1:$http_port2",
			"--extend.query-path=$MONITORING/queries.yaml",
			'--disable-default-metrics',
			'--no-collector.database',
			'--no-collector.bgwriter',
		],
		'<',
		\undef,
		'>',
		"$PostgreSQL::Test::Utils::log_path/050_exporter_second_exporter.log",
		'2>&1');
}
END { $exporter2->kill_kill(grace => 5) if $exporter2; }

# Prometheus scrapes both every second and evaluates the recording rules
# and the alert rules every second, its data in a directory of the test's.
my $prom_port = PostgreSQL::Test::Cluster::get_free_port();
my $prom_url = "http://127.0.0.1:$prom_port";
my $prom_dir = PostgreSQL::Test::Utils::tempdir('prometheus');
my $prometheus;
{
	open my $fh, '>', "$prom_dir/prometheus.yml" or die $!;
	print $fh <<"EOCONF";
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $MONITORING/recording.yml
  - $MONITORING/alerts.yml
scrape_configs:
  - job_name: postgres
    static_configs:
      - targets: ['127.0.0.1:$http_port', '127.0.0.1:$http_port2']
EOCONF
	close $fh;
	$prometheus = IPC::Run::start(
		[
			$PROMETHEUS,
			"--config.file=$prom_dir/prometheus.yml",
			"--storage.tsdb.path=$prom_dir/data",
			"--web.listen-address=127.0.0.1:$prom_port",
		],
		'<',
		\undef,
		'>',
		"$PostgreSQL::Test::Utils::log_path/050_exporter_prometheus.log",
		'2>&1');
}
END { $prometheus->kill_kill(grace => 5) if $prometheus; }

# GET /api/v1/... of Prometheus: its data, or death
sub prom_api
{
	my ($path, %params) = @_;
	my $r = $http->get(
		"$prom_url/api/v1/$path?" . $http->www_form_urlencode(\%params));
	die "GET $path: $r->{status} $r->{reason}\n$r->{content}"
	  unless $r->{success};
	my $j = JSON::PP::decode_json($r->{content});
	die "GET $path: $r->{content}" unless $j->{status} eq 'success';
	return $j->{data};
}

my $prom_ready = 0;
for (my $i = 0; $i < 10 * $PostgreSQL::Test::Utils::timeout_default; $i++)
{
	my $r = $http->get("$prom_url/-/ready");
	$prom_ready = $r->{success};
	last if $prom_ready || !$prometheus->pumpable;
	usleep(100_000);
}
ok($prom_ready, 'Prometheus answers on 127.0.0.1')
  or diag(
	slurp_file(
		"$PostgreSQL::Test::Utils::log_path/050_exporter_prometheus.log"));
# and has scraped both exporters before any TLS traffic (its discovery
# hands it the targets some 5 s after its start), so that its rates see
# all of it
ok( wait_until(
		sub {
			my $r = prom_api('query',
				query => 'count(up{job="postgres"} == 1) == 2');
			return scalar @{ $r->{result} };
		}),
	'Prometheus: both exporters scraped before the traffic');

# ---------------------------------------------------------------------
# what the views say, read as the superuser over the Unix socket
# ---------------------------------------------------------------------
sub json_rows
{
	my ($sql) = @_;
	return JSON::PP::decode_json(
		$node->safe_psql(
			'postgres', "SELECT coalesce(json_agg(x), '[]') FROM ($sql) x"));
}

# The series the exporter must show, from the views and pg_settings.
sub expected
{
	my $t = totals_row($node);
	my %e = (
		pg_ssl_renegotiate_connections_total => $t->{connections},
		pg_ssl_renegotiate_terminations_total => $t->{terminations},
		pg_ssl_renegotiate_rekey_failures_total => $t->{rekey_failures},
		pg_ssl_renegotiate_rekeys_skipped_total => $t->{rekeys_skipped},
		pg_ssl_renegotiate_renegotiations_refused_total =>
		  $t->{renegotiations_refused},
		pg_ssl_renegotiate_rekey_seconds_total => $t->{rekey_time} / 1000,
		pg_ssl_renegotiate_stats_reset_timestamp_seconds => $node->safe_psql(
			'postgres',
			'SELECT extract(epoch FROM stats_reset) FROM ssl_renegotiate_totals'
		),
		pg_ssl_renegotiate_library_preloaded => 1,);
	my $info = json_rows(
		q{SELECT evicted, extract(epoch FROM stats_reset) AS stats_reset
		  FROM ssl_renegotiate_database_role_totals_info})->[0];
	$e{pg_ssl_renegotiate_database_role_totals_evicted_total} =
	  $info->{evicted};
	$e{pg_ssl_renegotiate_database_role_totals_stats_reset_timestamp_seconds}
	  = $info->{stats_reset};
	$e{
		'pg_ssl_renegotiate_extension_info{version='
		  . $node->safe_psql(
			'postgres',
			q{SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate'}
		  )
		  . '}'
	} = 1;
	for my $dir ('sent', 'received')
	{
		$e{"pg_ssl_renegotiate_traffic_bytes_total{direction=$dir}"} =
		  $t->{"bytes_$dir"};
		$e{"pg_ssl_renegotiate_traffic_records_total{direction=$dir}"} =
		  $t->{"records_$dir"};
		$e{"pg_ssl_renegotiate_traffic_rekeys_total{direction=$dir}"} =
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
		$e{"pg_ssl_renegotiate_database_role_connections_total{$l,$u}"} =
		  $r->{connections};
		$e{"pg_ssl_renegotiate_database_role_terminations_total{$l,$u}"} =
		  $r->{terminations};
		$e{"pg_ssl_renegotiate_database_role_rekey_failures_total{$l,$u}"} =
		  $r->{rekey_failures};
		for my $dir ('sent', 'received')
		{
			my $k = "{$l,direction=$dir,$u}";
			$e{"pg_ssl_renegotiate_database_role_traffic_bytes_total$k"} =
			  $r->{"bytes_$dir"};
			$e{"pg_ssl_renegotiate_database_role_traffic_records_total$k"} =
			  $r->{"records_$dir"};
			$e{"pg_ssl_renegotiate_database_role_traffic_rekeys_total$k"} =
			  $r->{"rekeys_$dir"};
		}
	}

	# each live connection against its own limits in force
	my $live = json_rows(
		q{SELECT r.sent_since_rekey, r.received_since_rekey, r.rekey_pending,
		         r.rekey_requested, r.byte_limit, a.state, a.wait_event_type, r.version,
		         extract(epoch FROM r.rekey_interval) AS interval_seconds,
		         extract(epoch FROM now() - coalesce(r.last_rekey, a.backend_start)) AS key_age
		  FROM ssl_renegotiate_activity r LEFT JOIN pg_stat_activity a USING (pid)}
	);
	my (%max, %over, %over_bytes, %past_bytes, %pending_bytes);
	$max{$_} = $over{$_} = $over_bytes{$_} = $past_bytes{$_} =
	  $pending_bytes{$_} = 0
	  for 'sent', 'received';
	my $max_age = 0;
	my ($pending, $requested, $past) = (0, 0, 0);
	for my $r (@$live)
	{
		my $is_past =
			 defined $r->{interval_seconds}
		  && $r->{key_age} > $r->{interval_seconds}
		  && ($r->{state} // '') eq 'active'
		  && (!defined $r->{wait_event_type}
			|| $r->{wait_event_type} eq 'Client');
		$past++ if $is_past;
		for my $dir ('sent', 'received')
		{
			my $bytes = $r->{"${dir}_since_rekey"};
			$max{$dir} = $bytes if $bytes > $max{$dir};
			if (defined $r->{byte_limit}
				&& $bytes > $r->{byte_limit} +
				($r->{byte_limit} > 67108864 ? $r->{byte_limit} : 67108864))
			{
				$over{$dir}++;
				$over_bytes{$dir} += $bytes;
			}
			$past_bytes{$dir} += $bytes if $is_past;
			# the keys a pending rotation replaces: the client's, and on
			# TLS 1.2 the server's too
			$pending_bytes{$dir} += $bytes
			  if $r->{rekey_pending}
			  && ($dir eq 'received' || ($r->{version} // '') ne 'TLSv1.3');
		}
		$max_age = $r->{key_age}
		  if defined $r->{key_age} && $r->{key_age} > $max_age;
		$pending++ if $r->{rekey_pending};
		$requested++ if $r->{rekey_requested};
	}
	for my $dir ('sent', 'received')
	{
		$e{"pg_ssl_renegotiate_current_key_max_bytes{direction=$dir}"} =
		  $max{$dir};
		$e{"pg_ssl_renegotiate_current_key_over_limit{direction=$dir}"} =
		  $over{$dir};
		$e{
			"pg_ssl_renegotiate_current_key_past_interval_bytes{direction=$dir}"
		} = $past_bytes{$dir};
		$e{"pg_ssl_renegotiate_current_key_over_limit_bytes{direction=$dir}"}
		  = $over_bytes{$dir};
		$e{
			"pg_ssl_renegotiate_current_key_rekey_pending_bytes{direction=$dir}"
		} = $pending_bytes{$dir};
	}
	# moves with the clock: checked apart (check_scrape)
	$e{pg_ssl_renegotiate_connections_max_key_age_seconds} = $max_age;
	$e{pg_ssl_renegotiate_connections_rekey_pending} = $pending;
	$e{pg_ssl_renegotiate_connections_rekey_requested} = $requested;
	$e{pg_ssl_renegotiate_connections_past_interval} = $past;

	my %versions = ('TLSv1.2' => 0, 'TLSv1.3' => 0);
	$versions{ $_->{version} }++
	  for @{ json_rows('SELECT version FROM pg_stat_ssl WHERE ssl') };
	$e{"pg_ssl_renegotiate_tls_connections{version=$_}"} = $versions{$_}
	  for keys %versions;
	return \%e;
}

# Scrape between two readings of the views; they must agree with each
# other (nothing moved) and with every pg_ssl_renegotiate_* series, which
# must be exactly those expected.  Returns the scraped series.
sub check_scrape
{
	my ($what) = @_;
	my $before = expected();
	my ($m, $text) = scrape();
	my $after = expected();
	# the oldest key's age grows with the clock: between the two readings
	my $age = 'pg_ssl_renegotiate_connections_max_key_age_seconds';
	my ($age_before, $age_after) =
	  (delete $before->{$age}, delete $after->{$age});
	ok( defined $m->{$age}
		  && (
			  $age_before == 0 && $age_after == 0
			? $m->{$age} == 0
			: $m->{$age} >= $age_before - 0.001
			&& $m->{$age} <= $age_after + 0.001),
		"$what: $age between the two readings ($age_before .. $age_after): "
		  . ($m->{$age} // 'none'));
	is_deeply($after, $before,
		"$what: the views did not move during the scrape");
	note "$what: /metrics:\n"
	  . join("\n", grep { /^pg_ssl_renegotiate_/ } split /\n/, $text);

	is_deeply(
		[ sort grep { /^pg_ssl_renegotiate_/ && $_ ne $age } keys %$m ],
		[ sort keys %$after ],
		"$what: the exporter shows every expected pg_ssl_renegotiate series, no other"
	);
	for my $key (sort keys %$after)
	{
		next unless defined $m->{$key};
		cmp_ok($m->{$key}, '==', $after->{$key},
			"$what: $key = $after->{$key}");
	}
	is($m->{pg_up}, 1, "$what: pg_up 1");
	# the settings collector: the settings as the exporter's session sees
	# them, in base units
	my %setting = map { $_->{name} => $_ } @{
		json_rows(
			q{SELECT name, setting, unit FROM pg_settings WHERE name LIKE 'ssl_renegotiate.%'}
		)
	};
	for my $name ('byte_limit', 'hard_limit')
	{
		my $s = $setting{"ssl_renegotiate.$name"};
		die "unit of $name is $s->{unit}" unless $s->{unit} eq 'kB';
		cmp_ok(
			$m->{"pg_settings_ssl_renegotiate_${name}_bytes"},
			'==',
			$s->{setting} * 1024,
			"$what: pg_settings_ssl_renegotiate_${name}_bytes = $name in bytes"
		);
	}
	my $interval = $setting{'ssl_renegotiate.interval'};
	die "unit of interval is $interval->{unit}"
	  unless $interval->{unit} eq 's';
	is( $m->{pg_settings_ssl_renegotiate_interval_seconds},
		$interval->{setting},
		"$what: pg_settings_ssl_renegotiate_interval_seconds = interval in s"
	);
	is($m->{pg_exporter_last_scrape_error},
		0, "$what: no query failed (pg_exporter_last_scrape_error 0)");
	my @load = grep { /^pg_exporter_user_queries_load_error\{/ } keys %$m;
	is(scalar(@load), 1, "$what: one queries file");
	like(
		$load[0] // '',
		qr/filename=\Q$MONITORING\E\/queries\.yaml,/,
		"$what: ... ours");
	is( $m->{ $load[0] // '' },
		0,
		"$what: queries.yaml loaded (pg_exporter_user_queries_load_error 0)");
	return ($m, $text);
}

# ---------------------------------------------------------------------
# traffic
# ---------------------------------------------------------------------
my $copy_to = sub {
	my ($rows) = @_;
	return
	  "\\copy (SELECT i, repeat('x', 1000) FROM generate_series(1, $rows) i) to '/dev/null'";
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
		stdout => \$out,
		stderr => \$err);
	isnt($ret, 0, 'T: psql failed');
	like(
		$err,
		qr/FATAL:  terminating connection because its TLS 1\.2 keys reached ssl_renegotiate\.byte_limit/,
		'T: ended by the extension');
	my ($t_pid) = $out =~ /^(\d+)$/m;
	$node->poll_query_until('postgres',
		'SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = '
		  . ($t_pid // 0))
	  or die 'T: backend did not exit';
}

# R: TLS 1.3, idle, an operator's request waiting for its next I/O
my $requested = background_tls_psql($node, tls_connstr($node, tls => '1.3'));
my $requested_pid = $requested->query_safe('SELECT pg_backend_pid()');
ok(wait_idle($node, $requested_pid), 'R: idle');
is( $node->safe_psql(
		'postgres', "SELECT ssl_renegotiate_rekey($requested_pid)"),
	't',
	'R: ssl_renegotiate_rekey() accepted');

# P: TLS 1.3, COPY FROM STDIN with 300 kB sent and the copy left open
my $P_ROWS = 300;
my ($p_in, $p_out, $p_err) = ('', '', '');
my $p = IPC::Run::start(
	[
		'psql', '-XAtq', '-v',
		'ON_ERROR_STOP=1',
		'-d',
		tls_connstr(
			$node,
			tls => '1.3',
			application_name => 'copy_in',
			extra => $own_interval),
		'-f', '-'
	],
	'<',
	\$p_in,
	'>',
	\$p_out,
	'2>',
	\$p_err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$p_in .= "COPY copy_in FROM STDIN;\n";
$p->pump while length $p_in;
# (psql's output to a pipe is not flushed: ask the server for its pid)
$node->poll_query_until(
	'postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity
	  WHERE application_name = 'copy_in' AND query LIKE 'COPY copy_in FROM STDIN%'}
) or die 'P: COPY FROM did not start';
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
	for (
		my $i = 0;
		$i < 10 * $PostgreSQL::Test::Utils::timeout_default;
		$i++)
	{
		$p->pump_nb;
		my $row = activity_row($node, $p_pid);
		my $sock = kernel_socket_info($node, $p_pid);
		my $now = join(' ',
			$row->{bytes_received},
			$row->{bytes_sent}, $row->{rekey_pending} ? 1 : 0);
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


# S: TLS 1.3, its own interval 1s, in pg_sleep with a key older than that
my ($s_out, $s_err) = ('', '');
my $s = IPC::Run::start(
	[
		'psql', '-XAtq', '-d',
		tls_connstr(
			$node,
			tls => '1.3',
			application_name => 'sleeper',
			extra => $own_interval),
		'-c',
		'SELECT pg_sleep(300)'
	],
	'<',
	\undef,
	'>',
	\$s_out,
	'2>',
	\$s_err,
	IPC::Run::timeout(2 * $PostgreSQL::Test::Utils::timeout_default));
$node->poll_query_until(
	'postgres', q{
	SELECT a.wait_event = 'PgSleep' AND r.rekey_interval = '1s'
	   AND now() - coalesce(r.last_rekey, a.backend_start) > '1s'
	FROM ssl_renegotiate_activity r JOIN pg_stat_activity a USING (pid)
	WHERE application_name = 'sleeper'}
) or die 'S: not in pg_sleep past its interval';
my $s_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'sleeper'});

# C: TLS 1.2 under a role of its own with tls12 = warn (its keys never
# rotate) and interval = 1s, a COPY FROM STDIN open
my ($c_in, $c_out, $c_err) = ('', '', '');
my $c = IPC::Run::start(
	[
		'psql', '-XAtq', '-v',
		'ON_ERROR_STOP=1',
		'-d',
		tls_connstr(
			$node,
			tls => '1.2',
			user => 'regress_copy_past',
			application_name => 'copy_past'),
		'-f', '-'
	],
	'<',
	\$c_in,
	'>',
	\$c_out,
	'2>',
	\$c_err,
	IPC::Run::timeout(2 * $PostgreSQL::Test::Utils::timeout_default));
$c_in .= "COPY copy_in FROM STDIN;\n";
$c->pump while length $c_in;
$node->poll_query_until(
	'postgres',
	q{SELECT count(*) = 1 FROM pg_stat_activity
	  WHERE application_name = 'copy_past' AND query LIKE 'COPY copy_in FROM STDIN%'}
) or die 'C: COPY FROM did not start';
my $c_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE application_name = 'copy_past'});
my $c_rows = 0;

# Feed C and wait until what arrived is counted, the counters stay put
# and its key is older than its interval.  Returns its bytes received.
sub feed_copy_past
{
	my ($rows) = @_;
	my $sent = 0;
	for (1 .. $rows)
	{
		my $line = sprintf("%d\t%s\n", 1000 + ++$c_rows, 'z' x 1000);
		$c_in .= $line;
		$sent += length $line;
	}
	my $last = '';
	for (
		my $i = 0;
		$i < 10 * $PostgreSQL::Test::Utils::timeout_default;
		$i++)
	{
		$c->pump_nb;
		my $row = query_row_hash(
			$node,
			qq{SELECT r.bytes_received, r.bytes_sent,
			          now() - coalesce(r.last_rekey, a.backend_start) > r.rekey_interval AS past
			   FROM ssl_renegotiate_activity r JOIN pg_stat_activity a USING (pid)
			   WHERE pid = $c_pid});
		my $sock = kernel_socket_info($node, $c_pid);
		my $now = "$row->{bytes_received} $row->{bytes_sent}";
		return $row->{bytes_received}
		  if $row->{past}
		  && length($c_in) == 0
		  && $sock
		  && $sock->{recv_q} == 0
		  && $sock->{send_q} == 0
		  && $now eq $last;
		$last = $now;
		usleep(200_000);
	}
	die 'C: did not settle past its interval';
}
feed_copy_past(20);

# ---------------------------------------------------------------------
# 1. the server's interval off; S and C have their own
# ---------------------------------------------------------------------
my ($m) = check_scrape('interval off');
cmp_ok($m->{'pg_ssl_renegotiate_traffic_rekeys_total{direction=sent}'},
	'>', 0, 'interval off: the COPY TO rotated the server\'s key');
is($m->{pg_ssl_renegotiate_terminations_total},
	1, 'interval off: T counted as terminated');
cmp_ok($m->{pg_ssl_renegotiate_rekeys_skipped_total},
	'>=', 1, 'interval off: W\'s skipped rotations counted');
is($m->{pg_ssl_renegotiate_connections_total},
	7, 'interval off: 7 TLS connections, the exporter\'s own not among them');
is($m->{pg_ssl_renegotiate_connections_rekey_pending},
	1, 'interval off: P pending');
is($m->{pg_ssl_renegotiate_connections_rekey_requested},
	1, 'interval off: R requested');
is($m->{pg_ssl_renegotiate_connections_past_interval}, 2,
	'interval off: C and P, in COPYs past their own interval, counted; S, in pg_sleep past its own, not'
);
my $c_before = activity_row($node, $c_pid)->{received_since_rekey};
is( $m->{
		'pg_ssl_renegotiate_current_key_past_interval_bytes{direction=received}'
	},
	$c_before + activity_row($node, $p_pid)->{received_since_rekey},
	'interval off: the bytes under keys past their interval are C\'s and P\'s'
);
is($m->{'pg_ssl_renegotiate_current_key_over_limit{direction=received}'}, 0,
	'interval off: P\'s key, over 64kB but under its own 64kB + 64MiB, is not over its limit'
);
cmp_ok($m->{'pg_ssl_renegotiate_current_key_max_bytes{direction=received}'},
	'>', $LIMIT, 'interval off: P\'s key carried more than the limit');
is($m->{'pg_ssl_renegotiate_tls_connections{version=TLSv1.3}'},
	4, 'interval off: A, R, P and S on TLS 1.3');
is($m->{'pg_ssl_renegotiate_tls_connections{version=TLSv1.2}'},
	2, 'interval off: W and C on TLS 1.2');
is($m->{pg_settings_ssl_renegotiate_byte_limit_bytes},
	$LIMIT, 'interval off: the settings collector: byte_limit in bytes');
is( $m->{
		'pg_ssl_renegotiate_database_role_connections_total{datname=postgres,usename=postgres}'
	},
	5,
	'interval off: A, T, R, P and S under postgres/postgres');
is( $m->{
		'pg_ssl_renegotiate_database_role_connections_total{datname=postgres,usename=regress_tls12_warn}'
	},
	1,
	'interval off: W under its own role');
is( $m->{
		'pg_ssl_renegotiate_database_role_connections_total{datname=postgres,usename=regress_copy_past}'
	},
	1,
	'interval off: C under its own role');
is( $m->{
		'pg_ssl_renegotiate_database_role_terminations_total{datname=postgres,usename=postgres}'
	},
	1,
	'interval off: T terminated, under postgres/postgres');

# C moves 100 kB more under its old key: the bytes under keys past their
# interval grow (what SslRenegotiateKeyPastInterval waits for); S's do not
my $C_MORE = 100;
feed_copy_past($C_MORE);
($m) = check_scrape('C fed');
cmp_ok(
	$m->{
		'pg_ssl_renegotiate_current_key_past_interval_bytes{direction=received}'
	} - $c_before,
	'>=',
	$C_MORE * 1005 - 2 * 8192,
	'C fed: the bytes under keys past their interval grew by what C sent');
is($m->{pg_ssl_renegotiate_connections_past_interval},
	2, 'C fed: C and P still counted, S still not');

# The runbook (docs/monitoring.md, its last section): every SQL block
# runs, as the exporter's role; the one for SslRenegotiateKeyPastInterval
# finds C and P
{
	my $doc = slurp_file(dirname(__FILE__) . '/../../docs/monitoring.md');
	my ($runbook) = $doc =~ /^## Runbook\n(.*)\z/ms;
	my @blocks = ($runbook // '') =~ /^```sql\n(.*?)^```/msg;
	cmp_ok(scalar(@blocks), '>=', 8, 'runbook: an SQL block per alert');
	for my $sql (@blocks)
	{
		my ($ret, $out, $err) = $node->psql('postgres', $sql,
			extra_params => [ '-U', 'regress_exporter' ]);
		is($ret . $err, '0', "runbook: runs: " . (split /\n/, $sql)[0]);
	}
	my ($past_sql) = grep { /rekey_interval,/ } @blocks;
	$past_sql =~ s/;\s*$//;
	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(pid::text, ',' ORDER BY pid) FROM ($past_sql) x",
			extra_params => [ '-U', 'regress_exporter' ]),
		join(',', sort { $a <=> $b } $c_pid, $p_pid),
		'runbook: KeyPastInterval\'s query finds C and P, not S');
}

# ---------------------------------------------------------------------
# 2. the server's interval at 1s, after a reload: what counts is each
#    connection's own interval in force (the idle ones have none yet)
# ---------------------------------------------------------------------
$node->safe_psql('postgres',
	"ALTER SYSTEM SET ssl_renegotiate.interval = '1s'; SELECT pg_reload_conf()"
);
$node->poll_query_until('postgres',
	q{SELECT current_setting('ssl_renegotiate.interval') = '1s'})
  or die 'the reload did not take';
($m) = check_scrape('interval 1s');
is( activity_row($node, $copier_pid)->{rekey_interval},
	undef,
	'interval 1s: A, idle since before the reload, still enforces no interval'
);
is($m->{pg_ssl_renegotiate_connections_past_interval},
	2, 'interval 1s: C and P counted; S (pg_sleep) and idle A, R, W not');
is($m->{pg_settings_ssl_renegotiate_interval_seconds},
	1, 'interval 1s: the settings collector shows the reload, in seconds');

# ---------------------------------------------------------------------
# 3. every session ended: its traffic is in the totals
# ---------------------------------------------------------------------
# P ends its COPY and idles.  Where the server's last key update request
# came after libpq's last write (issue 28: libpq answers it at its next
# write), rekey_pending stays true while it idles; here the request
# pending during the COPY may be answered with the CopyDone, so this is
# not asserted.  Either way, the bytes under keys awaiting rotation stay
# put while nothing moves (what SslRenegotiateRekeyPending, which waits
# for them to grow, needs; its unit tests cover the idle pending case).
$p_in .= "\\.\n";
wait_until(
	sub {
		$p->pump_nb;
		return length($p_in) == 0
		  && $node->safe_psql('postgres',
			"SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $p_pid")
		  eq 't';
	}) or die 'P: not idle after its COPY FROM';
is($node->safe_psql('postgres', 'SELECT count(*) FROM copy_in'),
	$P_ROWS, 'P: every row stored');
{
	my $row = activity_row($node, $p_pid);
	note 'P idle after its COPY FROM: rekey_pending '
	  . ($row->{rekey_pending} ? 'true' : 'false')
	  . ", received_since_rekey $row->{received_since_rekey}";
	my ($m1) = check_scrape('P idle after its COPY FROM');
	usleep(1_100_000);
	my ($m2) = check_scrape('P still idle');
	is( $m2->{
			'pg_ssl_renegotiate_current_key_rekey_pending_bytes{direction=received}'
		},
		$m1->{
			'pg_ssl_renegotiate_current_key_rekey_pending_bytes{direction=received}'
		},
		'P still idle: the bytes under keys awaiting rotation did not grow');
}
$p->finish;
is($p_err, '', 'P: COPY FROM completed without error');
$c_in .= "\\.\n";
$c->finish;
is( $node->safe_psql('postgres', 'SELECT count(*) FROM copy_in'),
	$P_ROWS + $c_rows,
	'C: every row stored');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($s_pid)");
$s->finish;
like(
	$s_err,
	qr/canceling statement due to user request/,
	'S: pg_sleep cancelled');
$_->quit for $copier, $warned, $requested;
$node->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM ssl_renegotiate_activity')
  or die 'TLS sessions did not end';
my $text;
($m, $text) = check_scrape('all ended');
is($m->{pg_ssl_renegotiate_connections_total}, 7, 'all ended: 7 connections');
cmp_ok(
	$m->{
		'pg_ssl_renegotiate_database_role_traffic_bytes_total{datname=postgres,direction=sent,usename=postgres}'
	},
	'>',
	2_000_000,
	'all ended: A\'s 2 MB COPY TO under postgres/postgres');
is($m->{'pg_ssl_renegotiate_tls_connections{version=TLSv1.3}'},
	0, 'all ended: no TLS 1.3 connection');

# ---------------------------------------------------------------------
# Prometheus: the rules on the real series, the dashboard's queries
# ---------------------------------------------------------------------
my $inst1 = "127.0.0.1:$http_port";
my $inst2 = "127.0.0.1:$http_port2";
my $socket_server = $node->host . ':' . $node->port;
my $tcp_server = '127.0.0.1:' . $node->port;

# Prometheus has scraped the state of now (no TLS session left) and
# evaluated the rules on it
ok( wait_until(
		sub {
			my $r = prom_api('query',
				query =>
				  qq{pg_ssl_renegotiate_tls_connections{instance="$inst1",version="TLSv1.3"} == 0}
				  . qq{ and on (instance, server) server:pg_ssl_renegotiate_connections:rate5m}
			);
			return scalar @{ $r->{result} };
		}),
	'Prometheus: the last state scraped, the recording rules evaluated');

{
	my $targets = prom_api('targets', state => 'active')->{activeTargets};
	is_deeply(
		[ sort map { "$_->{labels}{instance} $_->{health}" } @$targets ],
		[ sort "$inst1 up", "$inst2 up" ],
		'Prometheus: both exporters scraped, up');

	my @rules = map { @{ $_->{rules} } } @{ prom_api('rules')->{groups} };
	my $count_rules = sub {
		my ($file) = @_;
		my $n = () =
		  slurp_file("$MONITORING/$file") =~ /^\s+- (?:record|alert):/mg;
		return $n;
	};
	is( scalar(grep { $_->{type} eq 'recording' } @rules),
		$count_rules->('recording.yml'),
		'Prometheus: every recording rule loaded');
	is( scalar(grep { $_->{type} eq 'alerting' } @rules),
		$count_rules->('alerts.yml'),
		'Prometheus: every alert rule loaded');
	is_deeply(
		[
			map  { "$_->{name}: $_->{health} $_->{lastError}" }
			grep { $_->{health} ne 'ok' } @rules
		],
		[],
		'Prometheus: every rule evaluates without error');

	# TLS traffic went through in the last minutes, and rotations
	my $q = sub { prom_api('query', query => $_[0])->{result} };
	ok( scalar @{
			$q->(
				qq{server_direction:pg_ssl_renegotiate_traffic_bytes:rate5m{instance="$inst1",direction="sent"} > 0}
			)
		},
		'Prometheus: TLS bytes sent per second, from the real traffic');
	ok( scalar @{
			$q->(
				qq{server_direction:pg_ssl_renegotiate_traffic_rekeys:rate5m{instance="$inst1",direction="sent"} > 0}
			)
		},
		'Prometheus: rotations of the server\'s key per second');
	is_deeply(
		[
			sort map { "$_->{metric}{datname}/$_->{metric}{usename}" } @{
				$q->(
					qq{server_datname_usename:pg_ssl_renegotiate_database_role_traffic_bytes:rate5m{instance="$inst1"}}
				)
			}
		],
		[
			'postgres/postgres', 'postgres/regress_copy_past',
			'postgres/regress_tls12_warn'
		],
		'Prometheus: traffic per (database, role), each pair');

	# The alerts: metrics missing for the one server without the
	# extension, behind the exporter whose other server has them
	my @alerts = @{ prom_api('alerts')->{alerts} };
	is_deeply(
		[
			map { "$_->{labels}{instance} " . ($_->{labels}{server} // '-') }
			  grep {
				$_->{labels}{alertname} eq 'SslRenegotiateMetricsMissing'
			  } @alerts
		],
		["$inst2 $tcp_server"],
		'Prometheus: SslRenegotiateMetricsMissing for the server without the extension alone, next to a healthy one behind the same exporter'
	);
	is( $q->(
			qq{pg_ssl_renegotiate_library_preloaded{instance="$inst2",server="$tcp_server"}}
		)->[0]{value}[1],
		1,
		'Prometheus: the server without the extension preloads the library');
	is( scalar @{
			$q->(
				qq{pg_ssl_renegotiate_extension_info{instance="$inst2",server="$tcp_server"}}
			)
		},
		0,
		'Prometheus: ... and has no pg_ssl_renegotiate_extension_info');
}

# The dashboard: importable JSON, its data source a variable, and every
# panel's query answered by Prometheus with at least one series (the
# variables $instance and $server at "All": .*)
{
	my $dash =
	  JSON::PP::decode_json(slurp_file("$MONITORING/grafana-dashboard.json"));
	my @panels = grep { $_->{type} ne 'row' } @{ $dash->{panels} };
	my @vars = @{ $dash->{templating}{list} };
	is_deeply(
		[ map { "$_->{name}:$_->{type}" } @vars ],
		[ 'datasource:datasource', 'instance:query', 'server:query' ],
		'dashboard: variables datasource, instance, server');
	is_deeply(
		[
			grep {
				!defined $_->{datasource}
				  || $_->{datasource}{uid} ne '${datasource}'
			} @panels,
			map { @{ $_->{targets} } } @panels
		],
		[],
		'dashboard: every panel and query reads the data source variable');
	my %ids;
	$ids{ $_->{id} }++ for @{ $dash->{panels} };
	is(scalar(grep { $_ > 1 } values %ids), 0, 'dashboard: panel ids unique');
	cmp_ok(scalar(@panels), '>=', 10,
		'dashboard: ' . scalar(@panels) . ' panels');

	my $subst =
	  sub { (my $e = shift) =~ s/\$(?:\{)?(instance|server)(?:\})?/.*/g; $e };
	for my $v (@vars[ 1 .. 2 ])
	{
		my ($match, $label) =
		  $v->{query}{query} =~ /^label_values\((.*),\s*(\w+)\)$/
		  or die "variable $v->{name}: $v->{query}{query}";
		my $values =
		  prom_api("label/$label/values", 'match[]' => $subst->($match));
		my @want =
		  $label eq 'instance'
		  ? ($inst1, $inst2)
		  : ($socket_server, $tcp_server);
		is_deeply(
			[ sort @$values ],
			[ sort @want ],
			"dashboard: variable $v->{name} lists @want");
	}
	for my $p (@panels)
	{
		ok(scalar @{ $p->{targets} // [] },
			"dashboard: panel \"$p->{title}\" has queries");
		for my $t (@{ $p->{targets} })
		{
			my $expr = $subst->($t->{expr});
			my $r = eval { prom_api('query', query => $expr)->{result} };
			ok( $r && @$r,
				"dashboard: \"$p->{title}\" $t->{refId}: "
				  . scalar(@{ $r // [] })
				  . " series for $expr") or diag($@);
		}
	}
}

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
		map    { "$_\n" }
		  grep { /^(# (HELP|TYPE) )?pg_ssl_renegotiate_/ } split /\n/,
		$text);
	my ($ok, $out) = promtool($ours, 'check', 'metrics');
	ok( $ok && $out eq '',
		'promtool check metrics: the pg_ssl_renegotiate series follow the naming conventions'
	) or diag($out);

	($ok, $out) = promtool('', 'check', 'rules', "$MONITORING/alerts.yml");
	ok( $ok && $out =~ /SUCCESS: \d+ rules found/,
		'promtool check rules: alerts.yml') or diag($out);

	($ok, $out) =
	  promtool('', 'test', 'rules', "$MONITORING/alerts_test.yml");
	ok($ok && $out =~ /SUCCESS/,
		'promtool test rules: alerts_test.yml passes')
	  or diag($out);

	($ok, $out) = promtool('', 'check', 'rules', "$MONITORING/recording.yml");
	ok( $ok && $out =~ /SUCCESS: \d+ rules found/,
		'promtool check rules: recording.yml') or diag($out);

	($ok, $out) =
	  promtool('', 'test', 'rules', "$MONITORING/recording_test.yml");
	ok($ok && $out =~ /SUCCESS/,
		'promtool test rules: recording_test.yml passes')
	  or diag($out);
}

$_->kill_kill(grace => 5) for $prometheus, $exporter2, $exporter;
undef $_ for $prometheus, $exporter2, $exporter;
$node->stop;
done_testing();
