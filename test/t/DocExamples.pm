# DocExamples.pm -- the SQL and shell examples of README.md and docs/*.md.
#
# An example is a fenced block whose info string starts with "sql" or "sh".
# A shell example is named by the word after "sh" (```sh main-job): the
# script that runs it asks for it by that name (scripts/doc_examples.pl run
# NAME), and scripts/doc_examples.pl check fails for one that nothing ran.
# SQL examples are all run by test/t/070_doc_examples.pl.  A ```text block right
# after an example (blank lines between allowed) is its output, which the
# runner compares with what it printed; see output_mismatch.  Other blocks
# (configuration files, ```text on its own) are not examples.

package DocExamples;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
our @EXPORT_OK = qw(doc_files examples output_mismatch normalized_lines);

# README.md, then docs/*.md in name order, relative to $top
sub doc_files
{
	my ($top) = @_;
	opendir(my $dh, "$top/docs") or return ('README.md');
	my @docs = sort grep { /\.md\z/ } readdir $dh;
	closedir $dh;
	return ('README.md', map { "docs/$_" } @docs);
}

# Every example of every documentation file, in order: hashes with file,
# line (of the opening fence), lang, name (undef if none), body and
# expected (the output block's text, or undef).
sub examples
{
	my ($top) = @_;
	my @all;
	for my $file (doc_files($top))
	{
		push @all, _examples_of($top, $file);
	}
	return @all;
}

sub _examples_of
{
	my ($top, $file) = @_;
	open(my $fh, '<', "$top/$file") or die "cannot read $top/$file: $!";
	my @lines = <$fh>;
	close $fh;

	my @found;
	my $i = 0;
	while ($i < @lines)
	{
		my $open = $lines[$i];
		if ($open !~ /^```(\S*)(?:\s+(\S+))?\s*$/)
		{
			$i++;
			next;
		}
		my ($lang, $name) = ($1, $2);
		my ($body, $end) = _block_body(\@lines, $i, $file);
		if ($lang eq 'sql' || $lang eq 'sh')
		{
			my %ex = (
				file => $file,
				line => $i + 1,
				lang => $lang,
				name => $name,
				body => $body);
			my $next = $end + 1;
			$next++ while $next < @lines && $lines[$next] =~ /^\s*$/;
			if ($next < @lines && $lines[$next] =~ /^```text\s*$/)
			{
				($ex{expected}, $end) = _block_body(\@lines, $next, $file);
			}
			push @found, \%ex;
		}
		$i = $end + 1;
	}
	return @found;
}

# the text between the fence at $start and its closing fence, and the
# closing fence's index
sub _block_body
{
	my ($lines, $start, $file) = @_;
	my $j = $start + 1;
	$j++ while $j < @$lines && $lines->[$j] !~ /^```\s*$/;
	die
	  sprintf("%s:%d: a code block that is never closed\n", $file, $start + 1)
	  if $j >= @$lines;
	return (join('', @{$lines}[ $start + 1 .. $j - 1 ]), $j);
}

# What is compared of an output: its non-empty lines, each with runs of
# blanks made one and the ends trimmed, psql's "psql:FILE:LINE: " prefix
# of an error taken off, and a table's rule (---+---) made "---", so that
# column widths do not matter.
sub normalized_lines
{
	my ($text) = @_;
	my @out;
	for my $l (split /\n/, $text)
	{
		$l =~ s/^psql:[^:]*:\d+: //;
		$l =~ s/\s+/ /g;
		$l =~ s/^ | $//g;
		next if $l eq '';
		$l = '---' if $l =~ /^[-+]+$/;
		push @out, $l;
	}
	return @out;
}

# undef if $actual matches $expected, else a description of the first
# difference.  The numbers of an example's output come from a real run
# (pids, byte counts, times): in the expected text every run of digits
# stands for any run of digits, and "..." for any text; everything else
# must be as shown.
sub output_mismatch
{
	my ($expected, $actual) = @_;
	my @want = normalized_lines($expected);
	my @got = normalized_lines($actual);
	for my $k (0 .. ($#want > $#got ? $#want : $#got))
	{
		my $w = $want[$k];
		my $g = $got[$k];
		return "line " . ($k + 1) . ": expected \"$w\", got nothing"
		  unless defined $g;
		return "line " . ($k + 1) . ": got \"$g\", expected nothing"
		  unless defined $w;
		my $re = join('',
			map { $_ eq '...' ? '.*?' : /^\d+$/ ? '\d+' : quotemeta }
			  split /(\.\.\.|\d+)/,
			$w);
		return "line " . ($k + 1) . ": expected \"$w\", got \"$g\""
		  unless $g =~ /\A$re\z/;
	}
	return undef;
}

1;
