# embed_modules.pl - writes perl_modules.c: the modules under src/perl/lib/
# as C strings, for the @INC hook that serves them to `require`.
# Usage: perl embed_modules.pl LIBDIR NAME... (NAME as require sees it).
use strict;
use warnings;

my ($lib, @names) = @ARGV;
print "/* generated from src/perl/lib/ by src/perl/embed_modules.pl */\n";
print "#include \"perl/perl_int.h\"\n";
print "const perl_module perl_modules[] = {\n";
for my $name (@names) {
    open my $fh, '<', "$lib/$name" or die "$lib/$name: $!\n";
    local $/;
    my $s = <$fh>;
    $s =~ s/([\\"?])/\\$1/g;    # ? too: no trigraphs
    $s =~ s/\n/\\n"\n"/g;
    print qq{    {"$name", "$s"},\n};
}
print "    {0, 0},\n};\n";
