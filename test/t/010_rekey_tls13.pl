
# TLS 1.3 key rotation with psql/libpq as the client.
#
#  a. limit = 64kB: >= 100 MB COPY TO and >= 100 MB COPY FROM over one
#     session; data identical; how often each direction's key rotates and
#     how much one key carries.  The client's side is observed independently
#     with a small LD_PRELOAD library on psql that sets an OpenSSL message
#     callback on libpq's SSL object (see $shim_c): it counts the KeyUpdate
#     messages libpq sends and receives and the bytes it sends and receives
#     under each key, so the server's counters can be checked against the
#     peer's own view.
#  b. a 2 GB COPY TO at limit = 64kB completes (no deadlock).
#  c. hard_limit ends a connection whose key carried too much, with a FATAL
#     the client receives: on the receive side (and the server log has
#     that FATAL alone) and on the send side (byte_limit = 0: keys never
#     rotate);
#     at the smallest hard_limit above byte_limit = 64kB, libpq's late
#     answers fit and a COPY FROM beyond it completes.
#  d. interval: keys rotate at the first I/O after the interval, not before.
#  (Cipher limits, 2^24 records per key for AES-GCM, i.e. ~256 GiB, are out
#  of reach of a test and not tested here.)
#
# Run as the OS user owning the tree (see test/t/000_harness.pl).

use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SslrTest;

my $LIMIT = 65536;    # ssl_renegotiate.byte_limit = 64kB, in bytes

# Largest TLS 1.3 record on the wire: header + 2^14 + 256 (RFC 8446 5.2).
my $MAX_TLS13_RECORD = 5 + 16384 + 256;

my $node = new_tls_node(
	'rekey13',
	conf => "ssl_renegotiate.byte_limit = 64kB\n"
	  . "ssl_renegotiate.log_rekeys = on\n"
	  # the COPY FROM table is unlogged; keep checkpoints out of the way
	  . "max_wal_size = 1GB\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION ssl_renegotiate');

my $tmp = PostgreSQL::Test::Utils::tempdir();
my $connstr = tls_connstr($node, tls => '1.3');

# ---------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------

# psql over TLS, without -q so that "COPY n" is printed; returns
# (exit code, stdout, stderr).
sub run_psql
{
	my ($cs, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'psql', '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $cs,
			'-f', '-'
		],
		'<',
		\$sql,
		'>',
		\$out,
		'2>',
		\$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return ($? >> 8, $out, $err);
}

# A small LD_PRELOAD library for psql: it wraps SSL_new() to set an OpenSSL
# message callback on libpq's connection, and keeps, per direction (client
# view), the KeyUpdate messages, the bytes on the wire (5 + record length
# per record header, as the server's accounting counts them) and the most
# bytes under one key, the current one included.  The numbers are rewritten
# at offset 0 of $KU_COUNT_FILE after every record, so a live session can be
# read.  The server's counters are the mirror image: the client's sent
# KeyUpdates are the server's rekeys_received, and so on.
my $shim_c = <<'EOC';
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <openssl/ssl.h>

/* index 0: received by the client, 1: sent by the client */
static long long key_updates[2], bytes[2], under_key[2], max_under_key[2];
static int	fd = -1;

static void
report(void)
{
	char		buf[256];
	int			n;

	if (fd < 0)
	{
		const char *f = getenv("KU_COUNT_FILE");

		if (f == NULL || (fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
			return;
	}
	n = snprintf(buf, sizeof(buf),
				 "key_updates_sent=%020lld key_updates_received=%020lld "
				 "bytes_sent=%020lld bytes_received=%020lld "
				 "max_sent_per_key=%020lld max_received_per_key=%020lld\n",
				 key_updates[1], key_updates[0], bytes[1], bytes[0],
				 max_under_key[1], max_under_key[0]);
	if (pwrite(fd, buf, n, 0) != n)
		abort();
}

static void
callback(int write_p, int version, int content_type, const void *buf,
		 size_t len, SSL *ssl, void *arg)
{
	const unsigned char *p = buf;
	int			d = write_p ? 1 : 0;

	(void) version;
	(void) ssl;
	(void) arg;
	if (content_type == SSL3_RT_HEADER && len >= 5)
	{
		long long	n = 5 + ((p[3] << 8) | p[4]);

		bytes[d] += n;
		under_key[d] += n;
		if (under_key[d] > max_under_key[d])
			max_under_key[d] = under_key[d];
		report();
	}
	else if (content_type == SSL3_RT_HANDSHAKE && len >= 1 &&
			 p[0] == SSL3_MT_KEY_UPDATE)
	{
		key_updates[d]++;
		under_key[d] = 0;
		report();
	}
}

SSL *
SSL_new(SSL_CTX *ctx)
{
	static SSL *(*real_SSL_new) (SSL_CTX *);
	SSL		   *ssl;

	if (real_SSL_new == NULL)
		real_SSL_new = (SSL *(*) (SSL_CTX *)) dlsym(RTLD_NEXT, "SSL_new");
	ssl = real_SSL_new(ctx);
	if (ssl != NULL)
		SSL_set_msg_callback(ssl, callback);
	return ssl;
}
EOC

my $shim;
{
	my $src = "$tmp/ku_shim.c";
	PostgreSQL::Test::Utils::append_to_file($src, $shim_c);
	my ($out, $err) = ('', '');
	my $cc = $ENV{CC} // 'cc';
	if (IPC::Run::run(
			[
				$cc, '-shared', '-fPIC', '-O2',
				'-o', "$tmp/ku_shim.so", $src, '-ldl'
			],
			'<',
			\undef,
			'>',
			\$out,
			'2>',
			\$err))
	{
		$shim = "$tmp/ku_shim.so";
	}
	else
	{
		note "could not build the client-side KeyUpdate counter: $out$err";
	}
}

my $shim_file = "$tmp/ku_counts.txt";

sub client_view
{
	return undef unless defined $shim && -e $shim_file;
	my $line = slurp_file($shim_file);
	my %v = $line =~ /(\w+)=(\d+)/g;
	$_ += 0 for values %v;
	return \%v;
}

# ssl_renegotiate log lines of one backend, from $offset on.
sub rekey_log
{
	my ($pid, $offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my %r = (sent => [], received => [], dropped => 0, unrequested => 0);
	for my $line (split /\n/, $log)
	{
		if ($line =~
			/ssl_renegotiate: rotated the sending key of pid \Q$pid\E after (\d+) bytes/
		  )
		{
			push @{ $r{sent} }, $1;
		}
		elsif ($line =~
			/ssl_renegotiate: client of pid \Q$pid\E rotated its sending key after (\d+) bytes( \(unrequested\))?/
		  )
		{
			push @{ $r{received} }, $1;
			$r{unrequested}++ if defined $2;
		}
		elsif ($line =~
			/ssl_renegotiate: (\d+) more rekeys of pid \Q$pid\E were not logged/
		  )
		{
			$r{dropped} += $1;
		}
	}
	return \%r;
}

sub max_of
{
	my $m = 0;
	for (@_) { $m = $_ if $_ > $m }
	return $m;
}

my $bad_log_re =
  qr/SSL error|could not receive data|could not send data|unexpected EOF|bad length|server process .* was terminated|terminated by signal/;

# ---------------------------------------------------------------------
# a. 100 MB each way at limit = 64kB over one TLS 1.3 session
# ---------------------------------------------------------------------

# ~1000-byte rows: i, tab, 992 hex digits, newline
my $nrows = 105_000;
my $gen =
  "SELECT i, repeat(md5(i::text), 31) AS t FROM generate_series(1, $nrows) i";
my $datafile = "$tmp/data.txt";

my $log_offset_a = -s $node->logfile;

my $s;
{
	local $ENV{LD_PRELOAD} = $shim if defined $shim;
	local $ENV{KU_COUNT_FILE} = $shim_file;
	$s = background_tls_psql($node, $connstr);
}
my $pid = $s->query_safe('SELECT pg_backend_pid()');
like($pid, qr/^\d+$/, 'a: TLS session has a backend pid');

ok(wait_idle($node, $pid), 'a: session idle before COPY TO');
my $r0 = activity_row($node, $pid);
is($r0->{version}, 'TLSv1.3', 'a: session uses TLS 1.3');
is($r0->{rekeys_sent} + $r0->{rekeys_received},
	0, 'a: no rotation before any bulk traffic');

# COPY TO the client
$s->query_safe("\\copy ($gen) to '$datafile'");
ok(wait_idle($node, $pid), 'a: session idle after COPY TO');
my $r1 = activity_row($node, $pid);
my $c1 = client_view();

my $file_size = -s $datafile;
cmp_ok($file_size, '>=', 100_000_000,
	'a: COPY TO wrote >= 100 MB to the client');
is( file_md5($datafile),
	$node->safe_psql(
		'postgres',
		"SELECT md5(string_agg(i || E'\\t' || t || E'\\n', '' ORDER BY i)) FROM ($gen) g"
	),
	'a: COPY TO data identical (md5 of the client file = md5 computed server-side)'
);

my $max_line = $node->safe_psql('postgres',
	"SELECT max(octet_length(i || E'\\t' || t || E'\\n')) FROM ($gen) g");
# CopyData: type byte + length word + the line
my $max_msg = 1 + 4 + $max_line;
my $bound_sent = send_key_bound($LIMIT, $max_msg);

my $sent_a = $r1->{bytes_sent} - $r0->{bytes_sent};
my $rekeys_sent_a = $r1->{rekeys_sent} - $r0->{rekeys_sent};
cmp_ok($sent_a, '>=', $file_size,
	'a: bytes_sent grew by at least the data size');
note "a: COPY TO: $sent_a bytes sent, $rekeys_sent_a rekeys_sent, "
  . "max_sent_per_key $r1->{max_sent_per_key} (bound $bound_sent), "
  . "largest message $max_msg bytes";

# Each key carries at most $bound_sent bytes, so the COPY needed at least
# $sent_a / $bound_sent keys; each retired key carried at least $LIMIT
# bytes (rotation is decided at >= limit), so there were at most
# $sent_a / $LIMIT + 1 rotations.
cmp_ok(
	$rekeys_sent_a, '>=',
	int($sent_a / $bound_sent) - 1,
	"a: rekeys_sent >= bytes_sent / $bound_sent");
cmp_ok(
	$rekeys_sent_a, '<=',
	int($sent_a / $LIMIT) + 1,
	'a: rekeys_sent <= bytes_sent / 64kB + 1 (no key retired early)');
cmp_ok($r1->{max_sent_per_key},
	'>=', $LIMIT, 'a: max_sent_per_key reaches the limit');
cmp_ok($r1->{max_sent_per_key}, '<=', $bound_sent,
	'a: max_sent_per_key <= 64kB + 8kB PqSendBuffer + largest message + TLS overhead'
);
is($r1->{rekeys_received} - $r0->{rekeys_received},
	0,
	'a: COPY TO: the client key did not rotate (the client sent ~nothing)');
is($r1->{rekey_failures}, 0, 'a: COPY TO: no rekey failures');

SKIP:
{
	skip 'client-side KeyUpdate counter not built', 3 unless defined $c1;
	note "a: client view after COPY TO: "
	  . join(', ', map { "$_=$c1->{$_}" } sort keys %$c1);
	is($c1->{key_updates_received},
		$r1->{rekeys_sent},
		'a: the client received exactly rekeys_sent KeyUpdates');
	is($c1->{max_received_per_key}, $r1->{max_sent_per_key},
		'a: most bytes the client received under one key = max_sent_per_key');
	is($c1->{bytes_received}, $r1->{bytes_sent},
		'a: bytes the client received = bytes_sent');
}

# COPY FROM the client, same session
$s->query_safe('CREATE UNLOGGED TABLE dst (i int, t text)');
$s->query_safe("\\copy dst from '$datafile'");
ok(wait_idle($node, $pid), 'a: session idle after COPY FROM');
my $r2 = activity_row($node, $pid);
my $c2 = client_view();

is( $node->safe_psql(
		'postgres',
		"SELECT count(*), md5(string_agg(i || E'\\t' || t || E'\\n', '' ORDER BY i)) FROM dst"
	),
	"$nrows|" . file_md5($datafile),
	'a: COPY FROM data identical (row count, md5 of the re-imported table = md5 of the file)'
);

my $recv_a = $r2->{bytes_received} - $r1->{bytes_received};
my $rekeys_recv_a = $r2->{rekeys_received} - $r1->{rekeys_received};
cmp_ok($recv_a, '>=', $file_size,
	'a: bytes_received grew by at least the data size');
note "a: COPY FROM: $recv_a bytes received, $rekeys_recv_a rekeys_received, "
  . "max_received_per_key $r2->{max_received_per_key} "
  . "(the client's lag in answering a key update request), "
  . "rekeys_sent grew by "
  . ($r2->{rekeys_sent} - $r1->{rekeys_sent});
cmp_ok($rekeys_recv_a, '>=', 1,
	'a: COPY FROM: the client rotated its sending key (rekeys_received >= 1)'
);
# Consistency: (rotations + 1) keys of at most max_received_per_key each
# carried everything received.
cmp_ok(
	($r2->{rekeys_received} + 1) * $r2->{max_received_per_key},
	'>=',
	$r2->{bytes_received},
	'a: (rekeys_received + 1) * max_received_per_key >= bytes_received');
cmp_ok($r2->{max_received_per_key}, '>', 0, 'a: max_received_per_key > 0');
# Once 8 requests went out in a row (each a KeyUpdate of the server's, with
# no data of its own between them), the server asks no more until it sends
# data (docs/settings.md, min_rekey_gap): the rest of the COPY then goes
# under one key, and only libpq's lag before that is bounded.
my $requests_a = $r2->{rekeys_sent} - $r1->{rekeys_sent};
if ($requests_a < 8)
{
	cmp_ok($r2->{max_received_per_key}, '<=', 64 * 1024 * 1024,
		'a: max_received_per_key <= 64 MB (libpq answers late, but it answers)'
	);
}
else
{
	cmp_ok($r2->{max_received_per_key}, '<=', $recv_a,
		'a: max_received_per_key <= the COPY (8 requests in a row: the server asked no more)'
	);
}
# Each request the server sends is a KeyUpdate(update_requested), which
# rotates the server's sending key as well: COPY FROM rotates the sending
# side about as often as the client rotates.
cmp_ok($r2->{rekeys_sent} - $r1->{rekeys_sent},
	'>=', $rekeys_recv_a,
	'a: COPY FROM: each request also rotated the server sending key');
is($r2->{rekey_failures}, 0, 'a: COPY FROM: no rekey failures');
is( $r2->{max_sent_per_key},
	$r1->{max_sent_per_key},
	'a: COPY FROM did not raise max_sent_per_key');

SKIP:
{
	skip 'client-side KeyUpdate counter not built', 3 unless defined $c2;
	note "a: client view after COPY FROM: "
	  . join(', ', map { "$_=$c2->{$_}" } sort keys %$c2);
	# The independent proof that the peer rotated: libpq itself wrote
	# this many KeyUpdate messages.
	is($c2->{key_updates_sent}, $r2->{rekeys_received},
		'a: libpq sent exactly rekeys_received KeyUpdates (seen on the client)'
	);
	is( $c2->{max_sent_per_key},
		$r2->{max_received_per_key},
		'a: most bytes libpq sent under one key = max_received_per_key');
	is($c2->{bytes_sent}, $r2->{bytes_received},
		'a: bytes libpq sent = bytes_received');
}

# The session reads its own row
my $own = $s->query_safe(
	'SELECT rekeys_sent, rekeys_received, max_sent_per_key, max_received_per_key '
	  . 'FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid()');
my @own = split /\|/, $own;
cmp_ok($own[0], '>=', $r2->{rekeys_sent},
	'a: own row via pg_backend_pid(): rekeys_sent');
cmp_ok(
	$own[1], '>=',
	$r2->{rekeys_received},
	'a: own row via pg_backend_pid(): rekeys_received');
# The client's key may change only now: once 8 requests went out in a row
# during COPY FROM, the server asks again after it has sent data (the
# CommandComplete), so the key the COPY ended under retires with this query.
is( $own[2],
	$r2->{max_sent_per_key},
	'a: own row via pg_backend_pid(): max_sent_per_key');
cmp_ok(
	$own[3], '>=',
	$r2->{max_received_per_key},
	'a: own row via pg_backend_pid(): max_received_per_key');

$s->query_safe('DROP TABLE dst');
ok(wait_idle($node, $pid), 'a: session idle at the end');
my $r3 = activity_row($node, $pid);
$s->quit;

# Wait for the backend to exit, so that every log line is written.
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid")
  or die "backend $pid did not exit";

# Log lines: one per rotation, both directions, or counted as dropped (at
# most 16 are queued between two safe points; during COPY FROM the server
# sends nothing, so the client's rotations queue up there).
my $lg = rekey_log($pid, $log_offset_a);
my $nsent_lines = scalar @{ $lg->{sent} };
my $nrecv_lines = scalar @{ $lg->{received} };
note "a: log: $nsent_lines 'rotated the sending key' lines, "
  . "$nrecv_lines 'client ... rotated its sending key' lines, "
  . "$lg->{dropped} not logged; the row says rekeys_sent=$r3->{rekeys_sent} "
  . "rekeys_received=$r3->{rekeys_received}";
is( $nsent_lines + $nrecv_lines + $lg->{dropped},
	$r3->{rekeys_sent} + $r3->{rekeys_received},
	'a: log lines + "not logged" = rekeys_sent + rekeys_received');
cmp_ok($nrecv_lines, '>=', 1,
	'a: log has "client of pid N rotated its sending key" lines');
cmp_ok(
	$nrecv_lines, '<=',
	$r3->{rekeys_received},
	'a: no more such lines than rekeys_received');
is($lg->{unrequested}, 0, 'a: libpq never rotated unasked');
is( max_of(@{ $lg->{sent} }),
	$r3->{max_sent_per_key},
	'a: largest "rotated the sending key after N bytes" = max_sent_per_key');
cmp_ok(
	max_of(@{ $lg->{received} }),
	'<=',
	$r3->{max_received_per_key},
	'a: logged client rotations carried <= max_received_per_key');

unlike(slurp_file($node->logfile, $log_offset_a),
	$bad_log_re, 'a: no SSL or connection errors in the server log');

# ---------------------------------------------------------------------
# b. 2 GB COPY TO at 64kB
# ---------------------------------------------------------------------
{
	my $log_offset = -s $node->logfile;
	my $rows = 2_100_000;
	my ($rc, $out, $err) = run_psql(
		$connstr, qq{SET ssl_renegotiate.log_rekeys = off;
\\copy (SELECT repeat('x', 1000) FROM generate_series(1, $rows)) to program 'wc -c > $tmp/wc.txt'
SELECT 'row:' || concat_ws(',', bytes_sent, rekeys_sent, max_sent_per_key, rekey_failures, version)
  FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();
});
	is($rc, 0, 'b: 2 GB COPY TO over TLS 1.3 at 64kB completed');
	is($err, '', 'b: psql printed no error');
	like($out, qr/^COPY $rows$/m, "b: COPY $rows");
	my $wc = -e "$tmp/wc.txt" ? slurp_file("$tmp/wc.txt") : '';
	$wc =~ s/\s+//g;
	is($wc, $rows * 1001, 'b: the client received every byte (wc -c)');
	my ($bytes, $rekeys, $maxkey, $failures, $version) =
	  $out =~ /^row:(\d+),(\d+),(\d+),(\d+),(\S+)$/m;
	ok(defined $rekeys, 'b: session read its own row');
	$bytes  //= 0;
	$rekeys //= 0;
	$maxkey //= 0;
	is($version, 'TLSv1.3', 'b: TLS 1.3');
	cmp_ok($bytes, '>', $rows * 1001, 'b: bytes_sent > 2 GB');
	my $bound = send_key_bound($LIMIT, 1 + 4 + 1001);
	note "b: 2 GB COPY TO: bytes_sent $bytes, rekeys_sent $rekeys, "
	  . "max_sent_per_key $maxkey (bound $bound)";
	cmp_ok(
		$rekeys, '>=',
		int($bytes / $bound) - 1,
		"b: rekeys_sent >= bytes_sent / $bound");
	cmp_ok(
		$rekeys, '<=',
		int($bytes / $LIMIT) + 1,
		'b: rekeys_sent <= bytes_sent / 64kB + 1');
	cmp_ok($maxkey, '<=', $bound, 'b: max_sent_per_key within the bound');
	is($failures, 0, 'b: no rekey failures');
	unlike(slurp_file($node->logfile, $log_offset),
		$bad_log_re, 'b: no SSL or connection errors in the server log');
}

# ---------------------------------------------------------------------
# c. hard_limit
# ---------------------------------------------------------------------

# Receive side.  libpq answers a key update request only when it next
# reads, which during COPY FROM is when its own write blocks: it sends
# several MB under one key after being asked (see a.; on a fresh
# connection the first answer came after 4.1-5.2 MB in 12 of 12 trials
# here, about the client's socket send buffer, net.ipv4.tcp_wmem max).
# The smallest hard_limit allowed above byte_limit = 64kB leaves 64MB for
# that: a 70 MB COPY FROM completes.  With byte_limit = 0 the client is
# never asked, and the same COPY FROM is ended at hard_limit = 64MB.
{
	my $file70 = "$tmp/data70.txt";
	{
		open(my $in, '<', $datafile) or die;
		open(my $o, '>', $file70) or die;
		while (my $l = <$in>)
		{
			print $o $l;
			last if tell($o) >= 70_000_000;
		}
		close $o;
		close $in;
	}
	$node->safe_psql('postgres',
		'CREATE UNLOGGED TABLE dst70 (i int, t text)');
	my $t0 = totals_row($node);

	my ($rc, $out, $err) = run_psql(
		$connstr, qq{SET ssl_renegotiate.hard_limit = '1MB';
});
	like(
		$err,
		qr/ssl_renegotiate\.hard_limit cannot be 1MB: the smallest value other than 0 is 64MB/,
		'c: hard_limit = 1MB is refused');
	# no check refuses a pair: the safe rule raises it in force (test/t/018)
	($rc, $out, $err) = run_psql(
		$connstr, qq{SET ssl_renegotiate.hard_limit = '64MB';
});
	is($rc . $err, '0',
		'c: hard_limit = 64MB above byte_limit = 64kB is accepted');
	($rc, $out, $err) = run_psql(
		$connstr, qq{SET ssl_renegotiate.hard_limit = '65MB';
\\copy dst70 from '$file70'
SELECT max_received_per_key FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();
});
	is($rc, 0,
		'c: hard_limit = 65MB, byte_limit = 64kB: a 70 MB COPY FROM completes'
	) or diag($err);
	my ($maxkey) = $out =~ /^(\d+)$/m;
	note 'c: libpq sent at most ' . ($maxkey // '?') . ' bytes under one key';
	is(totals_row($node)->{terminations} - $t0->{terminations},
		0, 'c: ... with no termination');
	$node->safe_psql('postgres', 'TRUNCATE dst70');

	# The receive side: decided inside SSL_read, said at a safe point, with
	# the FATAL of the send side, which the client receives; PostgreSQL's
	# own lines about a client it believes gone stay out of the log.
	$t0 = totals_row($node);
	my $log_offset = -s $node->logfile;
	($rc, $out, $err) = run_psql(
		$connstr, qq{\\set VERBOSITY verbose
SET ssl_renegotiate.byte_limit = 0;
SET ssl_renegotiate.hard_limit = '64MB';
SELECT 'pid:' || pg_backend_pid();
\\copy dst70 from '$file70'
SELECT 'still connected';
});
	note "c: receive side: psql exit code $rc, stderr: $err";
	isnt($rc, 0, 'c: COPY FROM beyond hard_limit fails');
	my ($cpid) = $out =~ /^pid:(\d+)$/m;
	ok(defined $cpid, 'c: got the backend pid');
	$cpid //= 0;
	unlike($out, qr/still connected/, 'c: the session did not go on');
	like(
		$err,
		qr/FATAL:  53400: terminating connection because more than ssl_renegotiate.hard_limit was received under one TLS key\nDETAIL:  \d+ bytes under one key; ssl_renegotiate.hard_limit is 64MB\.\nHINT:  ssl_renegotiate\.byte_limit is 0 \(off\), so keys do not rotate by bytes; set it below ssl_renegotiate\.hard_limit/,
		'c: psql gets FATAL 53400 "... more than ssl_renegotiate.hard_limit was received under one TLS key", with DETAIL and HINT'
	);
	is($node->safe_psql('postgres', 'SELECT count(*) FROM dst70'),
		'0', 'c: nothing of the COPY was committed');

	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $cpid")
	  or die "backend $cpid did not exit";
	my $log = slurp_file($node->logfile, $log_offset);
	my @errors = grep { /\[\Q$cpid\E\].*(?:ERROR|FATAL|PANIC):/ } split /\n/,
	  $log;
	is(scalar(@errors), 1, 'c: one error in the server log for the backend')
	  or diag(join("\n", @errors));
	like(
		$errors[0] // '',
		qr/FATAL:  terminating connection because more than ssl_renegotiate.hard_limit was received under one TLS key/,
		'c: ... the FATAL that says why');
	my @lost = grep {
		/\[\Q$cpid\E\].*(?:protocol synchronization was lost|unexpected EOF|connection to client lost|could not receive data)/
	} split /\n/, $log;
	is( join("\n", @lost),
		'',
		'c: no "unexpected EOF" nor "protocol synchronization was lost" line for the backend'
	);
	my ($nbytes) = $log =~
	  /\[\Q$cpid\E\].*DETAIL:  (\d+) bytes under one key; ssl_renegotiate.hard_limit is 64MB\./;
	ok(defined $nbytes,
		'c: server log says how many bytes and the limit (DETAIL)');
	$nbytes //= 0;
	note "c: the client sent $nbytes bytes under one key when it was ended";
	# decided at the first record that crossed the limit
	cmp_ok(
		$nbytes, '>',
		64 * 1024 * 1024,
		'c: ... more than 64MB under one key');
	cmp_ok(
		$nbytes, '<=',
		64 * 1024 * 1024 + $MAX_TLS13_RECORD,
		'c: ... by at most one record');
	my $t1 = totals_row($node);
	is($t1->{terminations} - $t0->{terminations},
		1, 'c: totals.terminations increased by 1');
}

# Send side.  limit = 0 turns byte-based rotation off, so the server's
# sending key never changes and a COPY TO of more than hard_limit is ended
# with a FATAL that reaches the client.
{
	my $t0 = totals_row($node);
	my $log_offset = -s $node->logfile;
	my ($rc, $out, $err) = run_psql(
		$connstr, qq{\\set VERBOSITY verbose
SET ssl_renegotiate.byte_limit = 0;
SET ssl_renegotiate.hard_limit = '64MB';
SELECT 'pid:' || pg_backend_pid();
\\copy (SELECT repeat('x', 1000) FROM generate_series(1, 70000)) to '/dev/null'
SELECT 'still connected';
});
	note "c: send side: psql exit code $rc, stderr: $err";
	isnt($rc, 0, 'c: COPY TO beyond hard_limit with limit = 0 fails');
	my ($cpid) = $out =~ /^pid:(\d+)$/m;
	$cpid //= 0;
	unlike($out, qr/still connected/, 'c: the session did not go on');
	like(
		$err,
		qr/FATAL:  53400: terminating connection because more than ssl_renegotiate.hard_limit was sent under one TLS key/,
		'c: client gets FATAL 53400 "... more than ssl_renegotiate.hard_limit was sent under one TLS key"'
	);
	my ($nbytes) =
	  $err =~
	  /DETAIL:  (\d+) bytes under one key; ssl_renegotiate.hard_limit is 64MB\./;
	ok(defined $nbytes, 'c: DETAIL gives the bytes under the key');
	$nbytes //= 0;
	like(
		$err,
		qr/HINT:  ssl_renegotiate\.byte_limit is 0 \(off\), so keys do not rotate by bytes; set it below ssl_renegotiate\.hard_limit by more than the client's lag in answering a key update/,
		'c: the HINT names byte_limit, hard_limit and the client\'s lag');
	cmp_ok($nbytes, '>', 64 * 1024 * 1024, 'c: ... more than 64MB');
	cmp_ok($nbytes, '<=', send_key_bound(64 * 1024 * 1024, 1 + 4 + 1001),
		'c: ... overshoot bounded like the limit (8 kB buffer + one message)'
	);

	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $cpid")
	  or die "backend $cpid did not exit";
	like(
		slurp_file($node->logfile, $log_offset),
		qr/FATAL:  terminating connection because more than ssl_renegotiate.hard_limit was sent under one TLS key/,
		'c: server log has the FATAL');
	my $t1 = totals_row($node);
	is($t1->{terminations} - $t0->{terminations},
		1, 'c: totals.terminations increased by 1');
}

# ---------------------------------------------------------------------
# d. interval
# ---------------------------------------------------------------------
{
	my $log_offset = -s $node->logfile;
	my $is = background_tls_psql($node, $connstr);
	# byte-based rotation off, so that only the interval rotates
	$is->query_safe(q{SET ssl_renegotiate.byte_limit = 0});
	$is->query_safe(q{SET ssl_renegotiate.interval = '1s'});
	my $ipid = $is->query_safe('SELECT pg_backend_pid()');
	ok(wait_idle($node, $ipid), 'd: session idle');
	my $d0 = activity_row($node, $ipid);

	sleep 2;
	my $d1 = activity_row($node, $ipid);
	is( $d1->{rekeys_sent} + $d1->{rekeys_received},
		$d0->{rekeys_sent} + $d0->{rekeys_received},
		'd: no rotation while idle (rotation waits for the first I/O)');

	$is->query_safe('SELECT 1');
	ok(wait_idle($node, $ipid), 'd: idle after the first query');
	my $d2 = activity_row($node, $ipid);
	note "d: after the first query: rekeys_sent "
	  . ($d2->{rekeys_sent} - $d0->{rekeys_sent})
	  . ", rekeys_received "
	  . ($d2->{rekeys_received} - $d0->{rekeys_received})
	  . ", rekey_pending $d2->{rekey_pending}";
	cmp_ok($d2->{rekeys_sent} - $d0->{rekeys_sent},
		'>=', 1,
		'd: the first I/O after the interval rotated the sending key');

	# The client answers the server's key update request with its next
	# write.
	$is->query_safe('SELECT 2');
	ok(wait_idle($node, $ipid), 'd: idle after the second query');
	my $d3 = activity_row($node, $ipid);
	note "d: after the second query: rekeys_sent "
	  . ($d3->{rekeys_sent} - $d0->{rekeys_sent})
	  . ", rekeys_received "
	  . ($d3->{rekeys_received} - $d0->{rekeys_received});
	cmp_ok($d3->{rekeys_received} - $d0->{rekeys_received},
		'>=', 1, 'd: the client rotated its sending key');
	is($d3->{rekey_failures}, 0, 'd: no rekey failures');
	$is->quit;
	unlike(slurp_file($node->logfile, $log_offset),
		$bad_log_re, 'd: no SSL or connection errors in the server log');
}

$node->stop;
done_testing();
