"""Test tools shipped with CodeFleet, for its own tiers and benchmarks: not model fakes.

`invariants` (with `invariants_content` and `invariants_landing`) is what a finished
run must prove, checked over its events, ledger and patches by the chaos harness and
the soak tier; `hosts` builds two "hosts" on one machine for the hosts tier; `delay` is
a TCP relay that adds round-trip time; `transport` records what a protocol wrote. The
scripted model APIs of the offline mode are `codefleet.offlinemodels`.
"""
