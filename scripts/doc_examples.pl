#!/usr/bin/perl
# doc_examples.pl -- the examples of README.md and docs/*.md (test/t/DocExamples.pm)
#
#   doc_examples.pl list         every example: FILE:LINE LANG NAME
#   doc_examples.pl show NAME    print the shell example NAME
#   doc_examples.pl run NAME     run the shell example NAME with bash -e,
#                                from the top of the tree, and compare its
#                                output with the ```text block after it,
#                                if any; its output is passed on.  With
#                                SSLR_DOC_EXAMPLES_LOG set, appends "ok
#                                NAME" or "FAILED NAME" to that file.
#   doc_examples.pl check LOG    every shell example was run, and passed,
#                                by the log; prints "Documentation
#                                examples: N passed, N failed".  A shell
#                                example with no name counts as failed (no
#                                script can ask for it).
# The SQL examples are run by test/t/070_doc_examples.pl, in every cell.
# scripts/test.sh sets the log and runs the check; the README's test
# command, block "test-command", is what .ci/run runs through "run".

use strict;
use warnings FATAL => 'all';

use Cwd 'abs_path';
use File::Basename 'dirname';
use Fcntl ':flock';

my $top;
BEGIN { $top = dirname(dirname(abs_path($0))); }
use lib "$top/test/t";
use DocExamples qw(examples output_mismatch);

my ($command, @args) = @ARGV;
$command //= '';

if ($command eq 'list')
{
	printf "%s:%d %s %s\n", $_->{file}, $_->{line}, $_->{lang},
	  $_->{name} // '-'
	  for examples($top);
	exit 0;
}
if ($command eq 'show' && @args == 1)
{
	my @named = named_shell_example($args[0]);
	print $named[0]{body} =~ s/\n\z//r if @named == 1;
	exit(@named == 1 ? 0 : 1);
}
if ($command eq 'run' && @args == 1)
{
	exit run_example($args[0]);
}
if ($command eq 'check' && @args == 1)
{
	exit check_log($args[0]);
}
print STDERR
  "usage: doc_examples.pl list | show NAME | run NAME | check LOG\n";
exit 2;

sub named_shell_example
{
	my ($name) = @_;
	return
	  grep { $_->{lang} eq 'sh' && ($_->{name} // '') eq $name }
	  examples($top);
}

sub run_example
{
	my ($name) = @_;
	my @named = named_shell_example($name);
	die "doc_examples.pl: no shell example named $name\n" unless @named;
	die "doc_examples.pl: two shell examples named $name\n" if @named > 1;
	my $ex = $named[0];
	chdir $top or die "cannot chdir to $top: $!";
	print "==> $ex->{file}:$ex->{line}, example $name\n";
	local $ENV{SSLR_DOC_EXAMPLE} = $name;
	my $ok;

	if (defined $ex->{expected})
	{
		my $out = output_of('bash', '-euo', 'pipefail', '-c', $ex->{body});
		print $out;
		my $mismatch =
		  $? == 0 ? output_mismatch($ex->{expected}, $out) : "exit status $?";
		print "doc_examples.pl: $name: $mismatch\n" if defined $mismatch;
		$ok = !defined $mismatch;
	}
	else
	{
		$ok = system('bash', '-euo', 'pipefail', '-c', $ex->{body}) == 0;
	}
	log_result($name, $ok);
	return $ok ? 0 : 1;
}

# what the command printed on stdout and stderr, in order; $? its status
sub output_of
{
	my @cmd = @_;
	my $pid = open(my $ph, '-|') // die "cannot fork: $!";
	if ($pid == 0)
	{
		open(STDERR, '>&', \*STDOUT) or die "cannot dup stdout: $!";
		exec @cmd or die "cannot run $cmd[0]: $!";
	}
	my $out = do { local $/; <$ph> }
	  // '';
	close $ph;
	return $out;
}

sub log_result
{
	my ($name, $ok) = @_;
	my $log = $ENV{SSLR_DOC_EXAMPLES_LOG} or return;
	open(my $fh, '>>', $log) or die "cannot append to $log: $!";
	flock($fh, LOCK_EX);
	print $fh(($ok ? 'ok' : 'FAILED') . " $name\n");
	close $fh;
}

sub check_log
{
	my ($log) = @_;
	my %result;
	if (open(my $fh, '<', $log))
	{
		while (<$fh>)
		{
			# a FAILED line wins over an ok of another run of the same one
			$result{$2} = $1
			  if /^(ok|FAILED) (\S+)$/ && ($result{$2} // '') ne 'FAILED';
		}
		close $fh;
	}
	my ($passed, $failed) = (0, 0);
	for my $ex (grep { $_->{lang} eq 'sh' } examples($top))
	{
		my $where = "$ex->{file}:$ex->{line}";
		my $name = $ex->{name};
		my $state =
			!defined $name         ? 'FAILED (no name: nothing can run it)'
		  : !exists $result{$name} ? 'FAILED (not run)'
		  : $result{$name} eq 'ok' ? 'ok'
		  :                          'FAILED';
		printf "documentation example %s: %s %s\n", $state, $where,
		  $name // '';
		$state eq 'ok' ? $passed++ : $failed++;
	}
	print "Documentation examples: $passed passed, $failed failed\n";
	return $failed ? 1 : 0;
}
