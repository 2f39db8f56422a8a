#!/usr/bin/env perl
# Prints the module graph of a crate's src/ as "from to" lines, one per
# edge, for scripts/check-deps.sh (which feeds them to tsort to find a
# cycle). Any crate's src/ works; the name is historical.
#
# An edge is a `crate::` or `super::` path in a file (use lines, grouped
# imports, inline paths), resolved to the module where the item lives:
# - a path through a `pub use` (the crate root's `crate::Round`, an old
#   path a module keeps for callers) follows it to the item's own module,
#   so a re-export hides no dependency and, being an alias, adds none;
# - otherwise the longest known module of the path; an item of the crate
#   root itself resolves to `crate`;
# - `super::` inside an inline module (`mod tests { use super::*; }`) is
#   the file's own module, and an edge from an inline module counts for
#   its file.
# `mod` declarations are containment, not edges. Glob re-exports
# (`pub use x::*`) are not followed.
#
#   perl scripts/solve-modules.pl crates/solve/src
#   perl scripts/solve-modules.pl src    (the binary: src/main.rs is its root)
use strict;
use warnings;

my $src = shift or die "usage: $0 SRC_DIR\n";
my @files = split /\n/, `find $src -name '*.rs' | sort`;
my %module_of;
for my $f (@files) {
    (my $rel = $f) =~ s{^\Q$src\E/}{};
    $rel =~ s{\.rs$}{};
    $rel =~ s{(^|/)(lib|mod)$}{};
    $rel = '' if $rel eq 'main';    # a binary's root (src/main.rs) is `crate`
    $module_of{$f} = $rel eq '' ? 'crate' : 'crate::' . join('::', split m{/}, $rel);
}
my %known = map { $_ => 1 } values %module_of;

sub parent {
    my ($m) = @_;
    return $m eq 'crate' ? 'crate' : ($m =~ s/::\w+$//r);
}

# A use tree at pos(): `ident(::tree)?( as name)?`, `{tree, ...}` or `*`;
# returns [full path, name it is known by] pairs.
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
        my ($name, $p) = ($1, "${pre}::$1");
        return tree($p) if /\G\s*::/gc;
        $name = $1 if /\G\s+as\s+(\w+)/gc;
        return ([$p, $name]);
    }
    return ([$pre, '']);
}

# The path a `crate::`/`super::` prefix (already matched) starts from, in
# module $m: `super::super::` climbs once per `super`.
sub start {
    my ($kw, $m) = @_;
    return 'crate' if $kw eq 'crate';
    my $p = parent($m);
    $p = parent($p) while /\G\s*super\s*::/gc;
    return $p;
}

# Source without comments, strings and char literals (doc links, format
# braces and '{' are not code).
my %text;
for my $f (@files) {
    local $/;
    open my $fh, '<', $f or die "$f: $!";
    local $_ = <$fh>;
    # One pass, so a `//` inside a string or a quote inside a comment is
    # read as what it is.
    s{(//[^\n]*|/\*.*?\*/)|(\bb?r(\#*)".*?"\3|"(?:[^"\\]|\\.)*")|('(?:[^'\\\n]|\\.[^']*)')}
     {defined $1 ? '' : defined $2 ? '""' : "' '"}gse;
    $text{$f} = $_;
}

# Re-exports: "module::name" → the full path it stands for.
my %alias;
for my $f (@files) {
    my $m = $module_of{$f};
    local $_ = $text{$f};
    while (/\bpub\s*(?:\([^)]*\))?\s*use\s+/gc) {
        my $pre;
        if (/\G(crate|super)\s*::/gc) {
            $pre = start($1, $m);
        } elsif (/\Gself\s*::/gc) {
            $pre = $m;
        } elsif (/\G(?=(\w+)\s*::)/gc && $known{"${m}::$1"}) {
            $pre = $m;    # a child module, named bare
        } else {
            next;    # another crate's item: not a module of this one
        }
        for my $t (tree($pre)) {
            my ($path, $name) = @$t;
            $alias{"${m}::$name"} = $path if $name ne '' && $name ne '*';
        }
    }
}

sub resolve {
    my ($path) = @_;
    for (1 .. 16) {    # a chain of re-exports, never a loop
        my @seg = split /::/, $path;
        my $i = $#seg;
        $i-- until $i == 0 || $known{ join '::', @seg[0 .. $i] };
        my $m = join '::', @seg[0 .. $i];
        return $m if $i == $#seg;
        my $a = $alias{"${m}::$seg[$i + 1]"} // return $m;
        $path = join '::', $a, @seg[$i + 2 .. $#seg];
    }
    die "re-exports of $path go round\n";
}

my %edges;
for my $f (@files) {
    my $from = $module_of{$f};
    local $_ = $text{$f};
    s{\bpub\s*(?:\([^)]*\))?\s*use\s[^;]*;}{;}g;    # aliases, read above
    # Inline modules: [path, brace depth], so `super::` inside one is right.
    my @inline = ([$from, 0]);
    my $depth = 0;
    while (/(\bmod\s+(\w+)\s*\{|[{}]|\b(crate|super)\s*::)/gc) {
        if (defined $2) {
            push @inline, [ "$inline[-1][0]::$2", ++$depth ];
        } elsif ($1 eq '{') {
            $depth++;
        } elsif ($1 eq '}') {
            pop @inline if @inline > 1 && $inline[-1][1] == $depth;
            $depth--;
        } else {
            for my $t (tree(start($3, $inline[-1][0]))) {
                my $to = resolve($t->[0]);
                $edges{"$from $to"} = 1 if $to ne $from;
            }
        }
    }
}
print "$_\n" for sort keys %edges;
