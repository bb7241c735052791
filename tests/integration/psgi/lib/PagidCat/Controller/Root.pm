# PagidCat/Controller/Root.pm - the routes of the Catalyst test app: a form
# POST, an upload, cookies, a redirect, JSON and a streamed response.
package PagidCat::Controller::Root;
use strict;
use warnings;
use base 'Catalyst::Controller';
use Digest::MD5 qw(md5_hex);
use JSON::PP ();

__PACKAGE__->config(namespace => '');

sub index : Path : Args(0) { $_[1]->res->body('catalyst home') }

sub default : Path {
    my ($self, $c) = @_;
    $c->res->status(404);
    $c->res->body('not found');
}

sub hello : Local : Args(1) {
    my ($self, $c, $name) = @_;
    $c->res->body("hello $name");
}

sub form : Local : Args(0) {
    my ($self, $c) = @_;
    my $p = $c->req->body_parameters;
    $c->res->body("form name=$p->{name} age=$p->{age}");
}

sub upload : Local : Args(0) {
    my ($self, $c) = @_;
    my $u = $c->req->upload('file') or return $c->res->body('no upload');
    $c->res->body(sprintf 'upload %s %d %s', $u->basename, $u->size, md5_hex($u->slurp));
}

sub cookie_set : Path('cookie/set') : Args(0) {
    my ($self, $c) = @_;
    $c->res->cookies->{flavour} = {value => 'oatmeal', path => '/'};
    $c->res->body('cookie set');
}

sub cookie_get : Path('cookie/get') : Args(0) {
    my ($self, $c) = @_;
    my $cookie = $c->req->cookie('flavour');
    $c->res->body('cookie=' . ($cookie ? $cookie->value : ''));
}

sub redirect : Local : Args(0) { $_[1]->res->redirect('/hello/redirected') }

sub json : Local : Args(0) {
    my ($self, $c) = @_;
    $c->res->content_type('application/json');
    $c->res->body(JSON::PP->new->canonical->encode({framework => 'Catalyst', list => [1, 2, 3]}));
}

# $c->res->write goes through the PSGI streaming writer.
sub stream : Local : Args(0) {
    my ($self, $c) = @_;
    $c->res->content_type('text/plain');
    $c->res->write("part $_\n") for 1 .. 3;
}

1;
