# Copyright (c) 2026, ssl_renegotiate developers

=pod

=head1 NAME

PgWire - the PostgreSQL wire protocol, as bytes, for tests that speak it
through a raw TLS stream (openssl s_client -starttls postgres)

=head1 SYNOPSIS

  use PgWire;
  print $to_s_client msg_startup(), msg_ext_query('SELECT 1');
  my @messages = pg_messages($bytes_from_server);   # [type, body], ...

=head1 DESCRIPTION

Encoders of the frontend messages the tests send (StartupMessage for user
and database postgres, Query, the extended protocol's Parse/Bind/Execute/
Sync, Terminate), and decoders of what the server sends back: its
messages, how many ReadyForQuery, the fields of an ErrorResponse, the
backend pid of BackendKeyData.  Protocol 3.0; no authentication exchange
(the tests' nodes trust).

=cut

package PgWire;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';

our @EXPORT = qw(
  msg_startup
  msg_query
  msg_ext_query
  msg_terminate
  pg_messages
  count_ready
  error_fields
  backend_pid
);

# A StartupMessage (protocol 3.0) for user and database postgres.
sub msg_startup
{
	my $body =
	  "user\0postgres\0database\0postgres\0application_name\0s_client\0\0";
	return pack('NN', 8 + length($body), 196608) . $body;
}

sub msg_query
{
	my ($sql) = @_;
	return 'Q' . pack('N', 4 + length($sql) + 1) . $sql . "\0";
}

# The extended protocol for one query, for s_client sessions that keep its
# command letters: a simple Query message starts with "Q", which s_client
# would take for its quit command.
sub msg_ext_query
{
	my ($sql) = @_;
	my $parse = "\0$sql\0" . pack('n', 0);
	my $bind = "\0\0" . pack('nnn', 0, 0, 0);
	my $exec = "\0" . pack('N', 0);
	return
		'P'
	  . pack('N', 4 + length($parse))
	  . $parse . 'B'
	  . pack('N', 4 + length($bind))
	  . $bind . 'E'
	  . pack('N', 4 + length($exec))
	  . $exec . 'S'
	  . pack('N', 4);
}

sub msg_terminate { return 'X' . pack('N', 4); }

# Split a server byte stream into [type, body] messages (complete ones).
sub pg_messages
{
	my ($buf) = @_;
	my @m;
	my $pos = 0;
	while ($pos + 5 <= length($buf))
	{
		my ($type, $len) = unpack('aN', substr($buf, $pos, 5));
		last if $pos + 1 + $len > length($buf);
		push @m, [ $type, substr($buf, $pos + 5, $len - 4) ];
		$pos += 1 + $len;
	}
	return @m;
}

sub count_ready
{
	return scalar grep { $_->[0] eq 'Z' } pg_messages($_[0]);
}

# fields of an ErrorResponse body: { S => 'FATAL', M => '...', ... }
sub error_fields
{
	my ($body) = @_;
	my %f;
	while ($body =~ /\G([^\0])([^\0]*)\0/gc) { $f{$1} = $2; }
	return \%f;
}

# The backend pid from BackendKeyData
sub backend_pid
{
	my ($buf) = @_;
	for my $m (pg_messages($buf))
	{
		return unpack('N', $m->[1]) if $m->[0] eq 'K';
	}
	return undef;
}

1;
