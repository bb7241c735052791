# EV.pm - what `require EV` finds inside a pagid worker: a refusal. EV carries
# its own libev, a second event loop nothing would run there (its watchers
# would never fire, EV::run would block the worker), so it fails loudly and
# `eval { require EV }` fallbacks take another path.
package EV;
die "EV cannot be used inside a pagid worker: it would be a second event loop that "
  . "never runs (pagid runs its own libev loop). Use IO::Async, AnyEvent or Future::IO, "
  . "which run on pagid's loop\n";
