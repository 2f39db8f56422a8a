#!/usr/bin/env perl
# Prints the module graph of a crate's src/ as "from to" lines, one per
# edge, for scripts/check-deps.sh (which feeds them to tsort to find a
# cycle). An edge is a `crate::` or `super::` path in a file (use lines,
# grouped imports, inline paths), resolved to the longest known module;
# an item of the crate root (Limits, Planner) resolves to `crate`. `mod`
# declarations are containment, not edges.
#
#   perl scripts/solve-modules.pl crates/solve/src
use strict;
use warnings;

my $src = shift or die "usage: $0 SRC_DIR\n";
my @files = split /\n/, `find $src -name '*.rs' | sort`;
my %module_of;
for my $f (@files) {
    (my $rel = $f) =~ s{^\Q$src\E/}{};
    $rel =~ s{\.rs$}{};
    $rel =~ s{(^|/)(lib|mod)$}{};
    $module_of{$f} = $rel eq '' ? 'crate' : 'crate::' . join('::', split m{/}, $rel);
}
my %known = map { $_ => 1 } values %module_of;

# A use tree at pos(): `ident(::tree)?`, `{tree, ...}` or `*`; returns full paths.
sub tree {
    my ($pre) = @_;
    my @out;
    if (/\G\s*\{/gc) {
        until (/\G\s*\}/gc) {
            push @out, tree($pre);
            /\G\s*,/gc or do { /\G\s*\}/gc; last };
        }
        return @out;
    }
    if (/\G\s*(\w+|\*)/gc) {
        my $p = "${pre}::$1";
        return /\G\s*::/gc ? tree($p) : ($p);
    }
    return ($pre);
}

sub resolve {
    my @seg = split /::/, shift;
    while (@seg) {
        my $p = join '::', @seg;
        return $p if $known{$p};
        pop @seg;
    }
    return 'crate';
}

my %edges;
for my $f (@files) {
    my $from = $module_of{$f};
    (my $parent = $from) =~ s/::\w+$//;
    $parent = 'crate' if $from eq 'crate';
    local $/;
    open my $fh, '<', $f or die "$f: $!";
    local $_ = <$fh>;
    s{//[^\n]*}{}g;    # comments (doc links are not dependencies)
    s{"(?:[^"\\]|\\.)*"}{""}g;    # strings
    while (/\b(crate|super)::/g) {
        for my $p (tree($1 eq 'crate' ? 'crate' : $parent)) {
            my $to = resolve($p);
            $edges{"$from $to"} = 1 if $to ne $from;
        }
    }
}
print "$_\n" for sort keys %edges;
