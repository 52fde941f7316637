
# Shared helpers for the ssl_renegotiate TAP tests.
#
# Tests get this directory on @INC through "-I t" (PROVE_FLAGS in the
# Makefile; for manual runs see test/t/000_harness.pl), so a plain
# "use SslrTest;" is enough.

=pod

=head1 NAME

SslrTest - TLS test nodes, connection strings and kernel TCP counters for
the ssl_renegotiate TAP tests

=head1 SYNOPSIS

  use PostgreSQL::Test::Cluster;
  use PostgreSQL::Test::Utils;
  use Test::More;
  use SslrTest;

  my $node = new_tls_node('primary', conf => "ssl_renegotiate.byte_limit = '64kB'");
  $node->start;

  my $connstr = tls_connstr($node, tls => '1.3');
  my $s = background_tls_psql($node, $connstr);
  my $pid = $s->query_safe('SELECT pg_backend_pid()');
  $s->query_safe(q{\copy (SELECT repeat('x', 1000) FROM generate_series(1, 5000)) to '/dev/null'});
  wait_idle($node, $pid);
  my ($received, $sent) = kernel_counts($node, $pid);
  $s->quit;

=cut

package SslrTest;

use strict;
use warnings FATAL => 'all';

use Digest::MD5;
use Exporter 'import';
use File::Basename qw(dirname);
use File::Spec;
use JSON::PP ();
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

our @EXPORT = qw(
  acl_lines_sql
  backend_of_client_port
  pid_of_socket
  log_position
  log_since
  wait_backends_gone
  wait_until
  make_certs
  new_tls_node
  tls_connstr
  tls_primary_conninfo
  background_tls_psql
  kernel_socket_info
  kernel_counts
  kernel_tls_counts
  wait_idle
  settled_tls_row
  kernel_exact_row
  check_walsender_rotation
  rekey_walsender
  bg_query
  query_row_hash
  activity_row
  totals_row
  file_md5
  series_copy_md5
  table_copy_md5
  send_key_bound
  make_client_cert
  make_host_cert
  build_hostile_peer
  run_hostile_peer
  openssl_at_least
  SSL_REQUEST_CLIENT_BYTES
  SSL_REQUEST_SERVER_BYTES
);

# The plaintext SSLRequest exchange that precedes the TLS handshake on every
# TLS connection: the client sends 8 bytes (length + magic code), the server
# answers with the single byte 'S'.  The kernel counts these; the extension
# does not (they are not TLS).
use constant SSL_REQUEST_CLIENT_BYTES => 8;
use constant SSL_REQUEST_SERVER_BYTES => 1;

# A TLS 1.3 record costs 5 bytes of header, 1 byte of inner content type and
# a 16-byte AEAD tag (AES-GCM and ChaCha20-Poly1305) on top of its
# plaintext; a KeyUpdate record carries a 4-byte handshake header and 1 byte
# of request_update.
use constant TLS13_RECORD_OVERHEAD => 5 + 1 + 16;
use constant KEY_UPDATE_RECORD => TLS13_RECORD_OVERHEAD + 4 + 1;
# PostgreSQL's PqSendBuffer (PQ_SEND_BUFFER_SIZE), written in pieces this big.
use constant PQ_SEND_BUFFER => 8192;

my $default_certs;    # per test file, made on first use by new_tls_node

=pod

=head1 FUNCTIONS

=over

=item make_certs($dir)

A throw-away CA and a server certificate signed by it (CN=localhost,
subjectAltName DNS:localhost and IP:127.0.0.1) in C<$dir> (created if
needed; a fresh temporary directory if undefined), by the project's one
recipe, scripts/make_certs.sh.  Private keys get mode 0600, as the server
requires.

Returns a hashref: C<dir>, C<ca_crt>, C<ca_key>, C<server_crt>,
C<server_key>.

=cut

sub make_certs
{
	my ($dir) = @_;
	$dir = PostgreSQL::Test::Utils::tempdir('certs') unless defined $dir;
	mkdir $dir unless -d $dir;
	die "make_certs: cannot create $dir" unless -d $dir;
	# the server reads these relative to its data directory: be absolute
	$dir = File::Spec->rel2abs($dir);
	_make_certs($dir, 'ssl_renegotiate test CA');
	return {
		dir => $dir,
		ca_crt => "$dir/ca.crt",
		ca_key => "$dir/ca.key",
		server_crt => "$dir/server.crt",
		server_key => "$dir/server.key",
	};
}

=pod

=item make_client_cert($certs, $cn)

A client certificate for user C<$cn>, signed by the CA of C<$certs> (from
make_certs; scripts/make_certs.sh --leaf).  Returns a hashref: C<crt>, C<key> (mode 0600, as libpq
requires).

=cut

sub make_client_cert
{
	my ($certs, $cn) = @_;
	_make_certs('--leaf', $certs->{dir}, "client_$cn", $cn);
	return {
		crt => "$certs->{dir}/client_$cn.crt",
		key => "$certs->{dir}/client_$cn.key"
	};
}

=pod

=item make_host_cert($certs, $name)

A server certificate for host name C<$name> (subjectAltName DNS:$name),
signed by the CA of C<$certs>.  Returns the common path of its C<.crt>
and C<.key>, without the suffix.

=cut

sub make_host_cert
{
	my ($certs, $name) = @_;
	_make_certs('--leaf', $certs->{dir}, $name, $name, "DNS:$name");
	return "$certs->{dir}/$name";
}

# scripts/make_certs.sh with these arguments; dies with its output if it
# fails
sub _make_certs
{
	my @cmd = (
		'bash',
		File::Spec->rel2abs(
			dirname(__FILE__) . '/../../scripts/make_certs.sh'),
		@_);
	my ($out, $err);
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err)
	  or die "make_certs: command failed: @cmd\n$out$err";
	return;
}

=pod

=item new_tls_node($name, %opts)

Creates (initdb, not started) a PostgreSQL::Test::Cluster node that accepts
TLS on 127.0.0.1 besides its usual Unix socket.  Options:

=over

=item allows_streaming => 0 | 1 | 'logical'  (passed to init)

=item no_preload => 1  -- don't put ssl_renegotiate in shared_preload_libraries

=item certs => hashref from make_certs (default: one set per test file)

=item conf => string appended to postgresql.conf last

=item real_pace => 1  -- leave ssl_renegotiate.debug_min_rekey_gap at its default (see below)

=item extra => [ initdb options ]  (passed to init)

=item install_path => the prefix of another PostgreSQL installation, which
the node runs (PostgreSQL::Test::Cluster's own option), e.g. the old major
of a pg_upgrade

=back

Unless no_preload or real_pace, the node sets
ssl_renegotiate.debug_min_rekey_gap = 0: the pace of rotations before
min_rekey_gap, which the tests that count rotations at small byte limits
expect.

pg_hba.conf is replaced by: local all/replication trust, and hostssl +
hostnossl all/replication for 127.0.0.1/32, trust.

=cut

sub new_tls_node
{
	my ($name, %opts) = @_;

	my $certs = $opts{certs} // ($default_certs //= make_certs());

	my $node = PostgreSQL::Test::Cluster->new(
		$name,
		(   defined $opts{install_path}
			? (install_path => $opts{install_path})
			: ()));
	$node->init(
		allows_streaming => $opts{allows_streaming} // 0,
		(defined $opts{extra} ? (extra => $opts{extra}) : ()));

	# The node keeps its Unix socket (PostgreSQL::Test::Cluster's default on
	# this platform, used by safe_psql & co.) and also listens on 127.0.0.1
	# at the same port; get_free_port() already checked that 127.0.0.1:port
	# is free.
	my $conf =
		"\n# Added by SslrTest.pm\n"
	  . "listen_addresses = '127.0.0.1'\n"
	  . "ssl = on\n"
	  . "ssl_cert_file = '$certs->{server_crt}'\n"
	  . "ssl_key_file = '$certs->{server_key}'\n"
	  . "ssl_ca_file = '$certs->{ca_crt}'\n";
	$conf .= "shared_preload_libraries = 'ssl_renegotiate'\n"
	  unless $opts{no_preload};
	# The old pace: tests count rotations at small byte limits (a test of
	# the pace itself sets it back to -1, min_rekey_gap's).
	$conf .= "ssl_renegotiate.debug_min_rekey_gap = 0\n"
	  unless $opts{no_preload} || $opts{real_pace};
	$conf .= "$opts{conf}\n" if defined $opts{conf};
	$node->append_conf('postgresql.conf', $conf);

	my $hba = $node->data_dir . '/pg_hba.conf';
	unlink $hba;
	$node->append_conf('pg_hba.conf', <<'EOHBA');
# Written by SslrTest.pm
# TYPE    DATABASE     USER  ADDRESS       METHOD
local     all          all                 trust
local     replication  all                 trust
hostssl   all          all   127.0.0.1/32  trust
hostnossl all          all   127.0.0.1/32  trust
hostssl   replication  all   127.0.0.1/32  trust
hostnossl replication  all   127.0.0.1/32  trust
EOHBA

	$node->{_sslr_certs} = $certs;
	return $node;
}

=pod

=item tls_connstr($node, %opts)

"host=127.0.0.1 port=PORT dbname=postgres sslmode=require gssencmode=disable"
plus, optionally:

=over

=item tls => '1.2' | '1.3'   -- sets both min and max protocol version

=item ssl_min_protocol_version / ssl_max_protocol_version => 'TLSv1.2' ...

=item user, dbname, application_name, sslmode, sslrootcert, replication

=item extra => raw 'key=value ...' appended at the end

=back

gssencmode=disable keeps libpq from trying a GSSENCRequest first (it would
add 8 + 1 plaintext bytes to the kernel counts when a Kerberos credential
cache happens to exist).

=cut

sub tls_connstr
{
	my ($node, %opts) = @_;

	my $min = $opts{ssl_min_protocol_version};
	my $max = $opts{ssl_max_protocol_version};
	if (defined $opts{tls})
	{
		my $v = $opts{tls};
		$v = "TLSv$v" unless $v =~ /^TLSv/;
		$min //= $v;
		$max //= $v;
	}

	my $s =
		'host=127.0.0.1 port='
	  . $node->port
	  . ' dbname='
	  . _cq($opts{dbname} // 'postgres')
	  . ' sslmode='
	  . ($opts{sslmode} // 'require')
	  . ' gssencmode=disable';
	$s .= " ssl_min_protocol_version=$min" if defined $min;
	$s .= " ssl_max_protocol_version=$max" if defined $max;
	for my $k (qw(user application_name sslrootcert replication))
	{
		$s .= " $k=" . _cq($opts{$k}) if defined $opts{$k};
	}
	$s .= " $opts{extra}" if defined $opts{extra};
	return $s;
}

# quote a conninfo value
sub _cq
{
	my ($v) = @_;
	return $v if $v =~ /^[A-Za-z0-9_.\/:-]+$/;
	$v =~ s/([\\'])/\\$1/g;
	return "'$v'";
}

=pod

=item tls_primary_conninfo($standby, $primary, %opts)

Appends a primary_conninfo to C<$standby>'s postgresql.conf that streams
from C<$primary> over TLS on 127.0.0.1 (overriding the Unix-socket one
that init_from_backup(has_streaming => 1) wrote).  %opts go to
tls_connstr (application_name defaults to the standby's name).  Returns
the connection string.

=cut

sub tls_primary_conninfo
{
	my ($standby, $primary, %opts) = @_;
	$opts{application_name} //= $standby->name;
	$opts{dbname}           //= 'postgres';
	my $c = tls_connstr($primary, %opts);
	(my $q = $c) =~ s/'/''/g;
	$standby->append_conf('postgresql.conf', "primary_conninfo = '$q'");
	return $c;
}

=pod

=item background_tls_psql($node, $connstr, %params)

A PostgreSQL::Test::BackgroundPsql session (psql -XAtq -f -, ON_ERROR_STOP)
connected with C<$connstr> (default: tls_connstr($node)).  %params are
those of Cluster::background_psql (timeout, on_error_stop, extra_params,
wait).

Cluster::background_psql always passes C<-d> with the node's own Unix-socket
connection string; a second C<-d> in extra_params comes later on psql's
command line, and psql keeps the last one, so the session uses C<$connstr>.

=cut

sub background_tls_psql
{
	my ($node, $connstr, %params) = @_;
	$connstr //= tls_connstr($node);
	my @extra = ('-d', $connstr, @{ $params{extra_params} // [] });
	return $node->background_psql('postgres', %params,
		extra_params => \@extra);
}

=pod

=item acl_lines_sql()

A query giving every privilege of the views in schema public, their
columns, and the functions named ssl_renegotiate_*, one line each, sorted:
what a dump and restore or a pg_upgrade must keep (test/t/048, test/t/049).

=cut

sub acl_lines_sql
{
	return q{SELECT string_agg(line, E'\n' ORDER BY line COLLATE "C") FROM (
  SELECT 'relation ' || c.oid::regclass || ' ' || coalesce(c.relacl::text, '-') AS line
  FROM pg_class c
  WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v'
  UNION ALL
  SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' ' || a.attacl::text
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  WHERE c.relnamespace = 'public'::regnamespace AND a.attacl IS NOT NULL
  UNION ALL
  SELECT 'function ' || p.oid::regprocedure || ' ' || coalesce(p.proacl::text, '-')
  FROM pg_proc p
  WHERE p.pronamespace = 'public'::regnamespace
    AND p.proname LIKE 'ssl\_renegotiate\_%') x};
}


=pod

=item log_position($node)

Where the node's server log ends now: an offset for log_since, or for
core's C<wait_for_log($regexp, $offset)>.

=cut

sub log_position
{
	my ($node) = @_;
	return -s $node->logfile;
}

=pod

=item log_since($node, $offset)

The node's server log from C<$offset> (a log_position) on.

=cut

sub log_since
{
	my ($node, $offset) = @_;
	return slurp_file($node->logfile, $offset);
}

=pod

=item wait_backends_gone($node, @pids)

Waits (bounded, as core's C<poll_query_until>) until none of the backends
C<@pids> is left: in neither pg_stat_activity nor ssl_renegotiate_activity,
so that its process has exited and its slot is folded into the totals.
True if they went.

=cut

sub wait_backends_gone
{
	my ($node, @pids) = @_;
	my $list = join(',', @pids);
	return $node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid IN ($list)) "
		  . "AND NOT EXISTS (SELECT 1 FROM ssl_renegotiate_activity WHERE pid IN ($list))"
	);
}

=pod

=item wait_until($check)

Calls C<$check> every 100 ms until it returns true, for as long as core's
helpers wait (C<$PostgreSQL::Test::Utils::timeout_default>); true if it
did.  For what no query can tell (a file, an HTTP endpoint, a process).

=cut

sub wait_until
{
	my ($check) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1 if $check->();
		usleep(100_000);
	}
	return 0;
}

=pod

=item backend_of_client_port($node, $client_port)

The pid of the backend whose established socket on the node's port has
C<$client_port> at the other end (from C<ss -tnpH>), or undef.

=cut


sub backend_of_client_port
{
	my ($node, $client_port) = @_;
	return pid_of_socket($node->port, $client_port);
}

=pod

=item pid_of_socket($local_port, $peer_port)

The pid of the process holding the established TCP socket whose local
port is C<$local_port> and whose peer's is C<$peer_port> (from
C<ss -tnpH>), or undef.

=cut

sub pid_of_socket
{
	my ($local_port, $peer_port) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'ss', '-tnpH', 'state', 'established',
			"( sport = :$local_port and dport = :$peer_port )"
		],
		'<',
		\undef,
		'>',
		\$out,
		'2>',
		\$err) or die "ss failed: $err";
	return $out =~ /\bpid=(\d+),/ ? $1 : undef;
}

=pod

=item kernel_socket_info($node, $pid)

Finds the established TCP socket on 127.0.0.1:PORT (server side) owned by
backend process C<$pid> with

  ss -tinpH state established '( sport = :PORT )'

and returns a hashref of what the kernel's tcp_info says about it:
C<recv_q>, C<send_q>, C<local>, C<peer>, C<bytes_received>,
C<bytes_acked>, C<bytes_sent> (each undef if ss did not print it),
C<bytes_retrans> (0 if ss did not print it: bytes sent again, which
C<bytes_sent> counts twice), plus C<raw> (the text).  Returns undef when no such socket exists.  ss can see
the owning process only for processes of the same user (tests run as the
server's OS user, so that holds) or as root.

=cut

sub kernel_socket_info
{
	my ($node, $pid) = @_;
	my $port = $node->port;

	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'ss', '-tinpH', 'state', 'established', "( sport = :$port )" ],
		'<', \undef, '>', \$out, '2>', \$err)
	  or die "ss failed: $err";

	# ss prints each socket as one line (queues, addresses, users:(...))
	# followed by indented line(s) of tcp_info; gather them per socket.
	my @socks;
	for my $line (split /\n/, $out)
	{
		if ($line =~ /^\S/)
		{
			push @socks, $line;
		}
		elsif (@socks)
		{
			$socks[-1] .= "\n$line";
		}
	}

	for my $s (@socks)
	{
		next unless $s =~ /users:\(.*\bpid=\Q$pid\E,/;
		my %i = (raw => $s);
		@i{qw(recv_q send_q local peer)} =
		  $s =~ /^(\d+)\s+(\d+)\s+(\S+)\s+(\S+)/;
		for my $k (qw(bytes_received bytes_acked bytes_sent))
		{
			$i{$k} = $s =~ /\b$k:(\d+)/ ? $1 : undef;
		}
		# ss omits counters that are still zero
		$i{bytes_received} //= 0;
		$i{bytes_acked}    //= 0;
		$i{bytes_retrans} = $s =~ /\bbytes_retrans:(\d+)/ ? $1 : 0;
		return \%i;
	}
	return undef;
}

=pod

=item kernel_counts($node, $pid)

Returns (bytes_received, bytes_acked, bytes_sent, bytes_retrans) for the server-side TCP
socket of backend C<$pid>, i.e. what C<ss -tin> prints.  First waits (up to
about 10 seconds) until everything the backend sent has been acknowledged
(Send-Q is 0 and bytes_acked == bytes_sent less retransmissions) so that
bytes_acked is the number of bytes the backend sent.  bytes_sent may be undef on old kernels;
bytes_sent counts retransmissions too, so prefer bytes_acked.

Returns an empty list when the socket is not found.

=cut

sub kernel_counts
{
	my ($node, $pid) = @_;
	my $i;
	for (my $try = 0; $try < 200; $try++)
	{
		$i = kernel_socket_info($node, $pid);
		return () unless defined $i;
		# bytes_sent counts retransmitted bytes again: after one
		# (loopback under load does that) it never equals bytes_acked.
		last
		  if $i->{send_q} == 0
		  && (!defined $i->{bytes_sent}
			|| $i->{bytes_sent} - $i->{bytes_retrans} == $i->{bytes_acked});
		usleep(50_000);
	}
	return (
		$i->{bytes_received}, $i->{bytes_acked},
		$i->{bytes_sent}, $i->{bytes_retrans});
}

=pod

=item kernel_tls_counts($node, $pid)

kernel_counts() less the plaintext SSLRequest exchange: returns
(bytes_received - 8, bytes_acked - 1), i.e. what the extension should
report as bytes_received / bytes_sent for a TLS connection made with
tls_connstr() (gssencmode=disable, so no GSSENCRequest precedes it).
Empty list when the socket is not found.

=cut

sub kernel_tls_counts
{
	my ($node, $pid) = @_;
	my ($rcv, $acked) = kernel_counts($node, $pid);
	return () unless defined $rcv;
	return ($rcv - SSL_REQUEST_CLIENT_BYTES,
		$acked - SSL_REQUEST_SERVER_BYTES);
}

=pod

=item wait_idle($node, $pid [, $timeout_seconds])

Waits until backend C<$pid> is "idle" in pg_stat_activity (queried over
the node's Unix socket) and its TCP socket has nothing left unread nor
unacknowledged (Recv-Q and Send-Q 0), so that both the extension's and the
kernel's counters have settled.  Returns true on success, false on timeout
(default $PostgreSQL::Test::Utils::timeout_default).

=cut

sub wait_idle
{
	my ($node, $pid, $timeout) = @_;
	$timeout //= $PostgreSQL::Test::Utils::timeout_default;
	my $deadline = time() + $timeout;
	while (time() <= $deadline)
	{
		my $state = $node->safe_psql('postgres',
			"SELECT state FROM pg_stat_activity WHERE pid = $pid");
		if ($state eq 'idle')
		{
			my $i = kernel_socket_info($node, $pid);
			return 1
			  if !defined $i || ($i->{recv_q} == 0 && $i->{send_q} == 0);
		}
		usleep(50_000);
	}
	return 0;
}

=pod

=item settled_tls_row($node, $pid)

Waits until backend C<$pid> is idle with a quiet socket (wait_idle), then
returns its activity row and kernel_tls_counts() for its socket:
C<($row, $received, $sent)>, what the row's C<bytes_received> and
C<bytes_sent> must equal for a connection made with tls_connstr().  An
empty list when the backend did not settle.

=cut

sub settled_tls_row
{
	my ($node, $pid) = @_;
	return () unless wait_idle($node, $pid);
	my @k = kernel_tls_counts($node, $pid);
	return (activity_row($node, $pid), @k);
}

=pod

=item kernel_exact_row($node, $pid, $what)

settled_tls_row() as assertions: backend C<$pid> has a row, and its
bytes_received and bytes_sent equal the kernel's counts for its socket
(less the SSLRequest exchange).  Returns the row (an empty hashref if
there is none).

=cut

sub kernel_exact_row
{
	my ($node, $pid, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($row, $krcv, $ksent) = settled_tls_row($node, $pid);
	ok(defined $row, "$what: backend $pid has a row");
	$row //= {};
	is($row->{bytes_received},
		$krcv, "$what: bytes_received == kernel bytes_received - 8");
	is($row->{bytes_sent}, $ksent,
		"$what: bytes_sent == kernel bytes_acked - 1");
	return $row;
}

=pod

=item check_walsender_rotation($before, $after, $limit, $max_message, $what)

Assertions on a walsender's activity rows read before and after a stream
(deltas, since a walsender's counts include WAL segment padding and
keepalives from before): it sent bytes, rotated its sending key between
bytes_sent / send_key_bound($limit, $max_message) - 1 and bytes_sent /
$limit + 1 times, no key carried more than the bound, and each key of the
receiving direction carried at most the bound too, rotating when the
walsender received more than that.  No rekey failure.  Returns the
deltas (sent, rekeys_sent, received, rekeys_received).

=cut

sub check_walsender_rotation
{
	my ($r0, $r1, $limit, $max_message, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $bound = send_key_bound($limit, $max_message);
	my $sent = $r1->{bytes_sent} - $r0->{bytes_sent};
	my $rekeys = $r1->{rekeys_sent} - $r0->{rekeys_sent};
	my $received = $r1->{bytes_received} - $r0->{bytes_received};
	my $rekeys_in = $r1->{rekeys_received} - $r0->{rekeys_received};
	note "$what: sent $sent bytes with $rekeys rotations (max_sent_per_key "
	  . "$r1->{max_sent_per_key}, bound $bound), received $received bytes "
	  . "with $rekeys_in rotations (max_received_per_key $r1->{max_received_per_key})";
	cmp_ok(
		$rekeys, '>=',
		int($sent / $bound) - 1,
		"$what: rekeys_sent grew by >= bytes_sent / $bound - 1");
	cmp_ok(
		$rekeys, '<=',
		int($sent / $limit) + 1,
		"$what: rekeys_sent grew by <= bytes_sent / $limit + 1");
	cmp_ok($r1->{max_sent_per_key},
		'<=', $bound, "$what: max_sent_per_key <= $bound");
	cmp_ok($r1->{max_received_per_key},
		'<=', $bound, "$what: max_received_per_key <= $bound");
	cmp_ok(
		($r1->{rekeys_received} + 1) * $r1->{max_received_per_key},
		'>=',
		$r1->{bytes_received},
		"$what: (rekeys_received + 1) * max_received_per_key >= bytes_received"
	);
	is($r1->{rekey_failures}, 0, "$what: no rekey failures");
	return ($sent, $rekeys, $received, $rekeys_in);
}

=pod

=item rekey_walsender($node, $walpid, $nudge, $what)

Asks walsender C<$walpid> of C<$node> to rotate its keys in both directions
(ssl_renegotiate_rekey), then runs C<$nudge> (SQL on C<$node> that writes
a little WAL, so that the walsender sends and its receiver replies) every
half second until the walsender's row shows one more rotation each way.
Asserts that both came and that nothing failed; returns the seconds it
took (noted, never asserted).

=cut

sub rekey_walsender
{
	my ($node, $walpid, $nudge, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r0 = activity_row($node, $walpid);
	my $t0 = time();
	is( $node->safe_psql('postgres', "SELECT ssl_renegotiate_rekey($walpid)"),
		't',
		"$what: ssl_renegotiate_rekey(walsender) accepted");
	my $r1 = $r0;
	while (time() - $t0 < $PostgreSQL::Test::Utils::timeout_default)
	{
		$node->safe_psql('postgres', $nudge);
		usleep(500_000);
		$r1 = activity_row($node, $walpid);
		last
		  if $r1->{rekeys_sent} > $r0->{rekeys_sent}
		  && $r1->{rekeys_received} > $r0->{rekeys_received}
		  && !$r1->{rekey_requested};
	}
	my $seconds = time() - $t0;
	note
	  "$what: rekeys sent $r0->{rekeys_sent} -> $r1->{rekeys_sent}, received "
	  . "$r0->{rekeys_received} -> $r1->{rekeys_received}, within ${seconds}s";
	cmp_ok($r1->{rekeys_sent}, '>', $r0->{rekeys_sent},
		"$what: the walsender rotated its sending key");
	cmp_ok($r1->{rekeys_received}, '>', $r0->{rekeys_received},
		"$what: the receiver rotated its sending key (the walsender received a KeyUpdate)"
	);
	is( $r1->{rekey_requests},
		$r0->{rekey_requests} + 1,
		"$what: rekey_requests grew by 1");
	ok(!$r1->{rekey_requested},
		"$what: the request is carried out both ways");
	is($r1->{rekey_failures}, 0, "$what: no rekey failures");
	return $seconds;
}

=pod

=item bg_query($session, $sql)

Runs C<$sql> in a BackgroundPsql session and returns (stdout, stderr) of
that query only.  Unlike C<query_safe> it does not die on stderr output,
and it clears the session's stderr buffer afterwards: in this version of
BackgroundPsql, C<query> never clears stderr, so after one WARNING or
NOTICE every later C<query_safe> on the session would die.

=cut

sub bg_query
{
	my ($session, $sql) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $out = $session->query($sql);
	my $err = $session->{stderr};
	$session->{stderr} = '';
	return ($out, $err);
}

=pod

=item query_row_hash($node, $sql [, %psql_params])

Runs C<SELECT row_to_json(x) FROM ($sql) x> with safe_psql (Unix socket
unless %psql_params has connstr) and returns the first row as a hashref
(column => value; SQL NULL => undef, booleans as JSON::PP booleans, which
compare as 1/0), or undef if there is no row.

=item activity_row($node, $pid)

The ssl_renegotiate_activity row of backend C<$pid> as a hashref (undef if
none).

=item totals_row($node)

The ssl_renegotiate_totals row as a hashref.

=cut

sub query_row_hash
{
	my ($node, $sql, %params) = @_;
	my $json = $node->safe_psql('postgres',
		"SELECT row_to_json(x) FROM ($sql) x LIMIT 1", %params);
	return undef if $json eq '';
	return JSON::PP::decode_json($json);
}

sub activity_row
{
	my ($node, $pid) = @_;
	return query_row_hash($node,
		"SELECT * FROM ssl_renegotiate_activity WHERE pid = $pid");
}

sub totals_row
{
	my ($node) = @_;
	return query_row_hash($node, 'SELECT * FROM ssl_renegotiate_totals');
}

=pod

=item file_md5($path)

The hex MD5 of a file's bytes.

=cut

sub file_md5
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "cannot open $path: $!";
	binmode $fh;
	my $md5 = Digest::MD5->new->addfile($fh)->hexdigest;
	close $fh;
	return $md5;
}

=pod

=item series_copy_md5($node, $rows, $filler)

The MD5, computed by the server, of the COPY text output of

  SELECT i, md5(i::text) || repeat('x', $filler) FROM generate_series(1, $rows) i

which the COPY TO tests send to their clients.

=cut

sub series_copy_md5
{
	my ($node, $rows, $filler) = @_;
	return $node->safe_psql('postgres',
		"SELECT md5(string_agg(i || E'\\t' || md5(i::text) || repeat('x', $filler) || E'\\n', '' ORDER BY i)) "
		  . "FROM generate_series(1, $rows) i");
}

=pod

=item table_copy_md5($node, $table)

"ROWS MD5" of table C<$table> (columns C<i int, s text>) in COPY text form,
ordered by C<i>, computed by the server: what a COPY FROM must have stored.

=cut

sub table_copy_md5
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || coalesce(md5(string_agg(i || E'\\t' || s || E'\\n', '' ORDER BY i)), '') FROM $table"
	);
}

=pod

=item send_key_bound($limit, $max_message)

The most bytes one TLS 1.3 sending key may carry when the extension rotates
at C<$limit> bytes and the largest protocol message is C<$max_message>
bytes.  The extension checks at its safe points (before a message is
queued, before a flush); below the limit at one check, then until the next
check the message being queued and what was still in PqSendBuffer (at most
8 kB) may go out.  PostgreSQL writes PqSendBuffer in 8 kB pieces, so that
is at most 8 kB + C<$max_message> of plaintext in 8 kB records (plus one
partial record), each with TLS13_RECORD_OVERHEAD bytes.  The KeyUpdate
record itself counts under the old key (its header is seen before the
message), so it is added too.  Large writes make 16 kB records, so the
bound overstates the overhead a little.

=cut

sub send_key_bound
{
	my ($limit, $max_message) = @_;
	my $plain = PQ_SEND_BUFFER + $max_message;
	my $records = int(($plain + PQ_SEND_BUFFER - 1) / PQ_SEND_BUFFER) + 1;
	return $limit + $plain + $records * TLS13_RECORD_OVERHEAD +
	  KEY_UPDATE_RECORD;
}

=pod

=item build_hostile_peer()

The hostile peer of test/t/peer/ (hostile_peer, a misbehaving TLS client, see
test/t/peer/main.c), which make builds there (test/t/peer/Makefile, a PGXS
PROGRAM against the OpenSSL PostgreSQL was built with, -Werror under make
lint) before the TAP tests run: one test assertion that it is there;
bails out if it is not.  Returns its path.

=cut

sub build_hostile_peer
{
	my $peer = File::Spec->rel2abs(dirname(__FILE__) . '/peer/hostile_peer');
	ok(-x $peer, 'hostile_peer (test/t/peer/) was built by make')
	  or BAIL_OUT("no $peer: make check-tap builds it (make -C test/t/peer)");
	return $peer;
}

# The directories of the $flag options (-I, -L) in pg_config's $option.
sub _configured_dirs
{
	my ($option, $flag) = @_;
	my $v = '';
	IPC::Run::run([ 'pg_config', $option ], '<', \undef, '>', \$v)
	  or BAIL_OUT("pg_config $option failed");
	return map { substr($_, length $flag) } grep { /^\Q$flag\E./ } split ' ',
	  $v;
}

=pod

=item openssl_at_least($major, $minor)

True if the server under test was built against OpenSSL $major.$minor or
later: the version in the opensslv.h of its pg_config's -I directories, or
the system's.

=cut

sub openssl_at_least
{
	my ($major, $minor) = @_;
	my @dirs = (_configured_dirs('--cppflags', '-I'), '/usr/include');
	my ($header) = grep { -f } map { "$_/openssl/opensslv.h" } @dirs;
	BAIL_OUT('no openssl/opensslv.h found') unless defined $header;
	my $text = PostgreSQL::Test::Utils::slurp_file($header);
	my ($maj, $min);
	if ($text =~ /define\s+OPENSSL_VERSION_MAJOR\s+(\d+)/)
	{
		$maj = $1;
		($min) = $text =~ /define\s+OPENSSL_VERSION_MINOR\s+(\d+)/;
	}
	elsif ($text =~ /define\s+OPENSSL_VERSION_NUMBER\s+0x([0-9a-fA-F]+)/)
	{
		# 1.1.1: 0xMNNFFPPS
		my $n = hex $1;
		($maj, $min) = ($n >> 28, ($n >> 20) & 0xff);
	}
	BAIL_OUT("no OpenSSL version in $header") unless defined $min;
	return $maj > $major || ($maj == $major && $min >= $minor);
}

=pod

=item run_hostile_peer($peer, $node, %opts)

Runs the client against C<$node> and returns a hashref of its key=value
lines (the last of each key wins; io_error lines are joined) plus C<_out>
and C<_err>.  %opts: C<args> => [...]; C<holds> => { name => sub { my
($facts) = @_; ... } }, called at each hold point (C<--hold> is then added).

=cut

sub run_hostile_peer
{
	my ($peer, $node, %o) = @_;
	my @cmd = ($peer, '--port', $node->port);
	push @cmd, '--hold' if $o{holds};
	push @cmd, @{ $o{args} };
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(\@cmd, '<', \$in, '>', \$out, '2>', \$err,
		IPC::Run::timeout(150));
	eval {
		my $seen = 0;
		while (1)
		{
			my @holds = ($out =~ /^hold=(\S+)$/mg);
			if (@holds > $seen)
			{
				my $name = $holds[ $seen++ ];
				my $cb = $o{holds} && $o{holds}{$name};
				$cb->(_parse_peer($out)) if $cb;
				$in .= "go\n";
				next;
			}
			last if $out =~ /^result=/m;
			last unless $h->pumpable;
			$h->pump;
		}
		$h->finish;
		1;
	} or do
	{
		my $e = $@;
		$h->kill_kill;
		$out .= "\nresult=harness_error\n";
		diag("hostile_peer @cmd: $e");
	};
	my $r = _parse_peer($out);
	$r->{_err} = $err;
	note("hostile_peer @{ $o{args} }:\n$out"
		  . ($err ne '' ? "stderr: $err" : ''));
	return $r;
}

sub _parse_peer
{
	my ($out) = @_;
	my %r = (_out => $out, io_error => '');
	for my $line (split /\n/, $out)
	{
		next unless $line =~ /^(\w+)=(.*)$/;
		if ($1 eq 'io_error')
		{
			$r{io_error} .= "$2; ";
		}
		else
		{
			$r{$1} = $2;
		}
	}
	$r{result} //= '(none)';
	return \%r;
}

=back

=cut

1;
