"""Driver: for each group, start its pagid, run its attacks, print one
PASS/FAIL line each; exit 1 on any failure. Usage: battery.py PAGID [-k SUBSTR]"""

import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def run_group(binary, label, factory, attacks, only):
    attacks = [a for a in attacks if not only or any(o in a.__name__ for o in only)]
    if not attacks:
        return 0, 0
    work = tempfile.mkdtemp(prefix="pagid-attack-%s-" % label)
    fails = 0
    try:
        target = factory(binary, work)
    except Exception as e:
        for a in attacks:
            print("FAIL %s.%s: could not start the server: %s" % (label, a.__name__, e), flush=True)
        return 0, len(attacks)
    for a in attacks:
        t0 = time.monotonic()
        try:
            if not target.srv.alive():
                raise common.AttackFailure("server not running before the attack")
            note = a(target)
            crashes = target.srv.crash_lines()
            if crashes:
                raise common.AttackFailure("crash in log: %s" % crashes[:3])
            print("PASS %s.%s (%.1fs): %s" % (label, a.__name__, time.monotonic() - t0, note), flush=True)
        except Exception as e:
            fails += 1
            detail = str(e) if isinstance(e, common.AttackFailure) else traceback.format_exc(limit=3).replace("\n", " | ")
            print("FAIL %s.%s (%.1fs): %s" % (label, a.__name__, time.monotonic() - t0, detail), flush=True)
            if not target.srv.alive():
                target = factory(binary, work)  # a fresh server for the rest
    rc = target.srv.stop()
    crashes = target.srv.crash_lines()
    if crashes or rc not in (0, None):
        fails += 1
        print("FAIL %s.clean_stop: exit %r, crash lines %s (log %s)" % (label, rc, crashes[:3], target.srv.log_path), flush=True)
    else:
        print("PASS %s.clean_stop: exit 0, no sanitizer/crash line in the log" % label, flush=True)
    if fails == 0 and not os.environ.get("ATTACK_KEEP"):
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("     logs kept in %s" % work, flush=True)
    return len(attacks) + 1 - fails, fails


def main():
    binary = os.path.abspath(sys.argv[1])
    only = sys.argv[3:] if len(sys.argv) > 2 and sys.argv[2] == "-k" else []
    import attacks_h2, attacks_pool, attacks_h1, attacks_fields
    groups = [("h2", attacks_h2.H2Target, attacks_h2.ATTACKS),
              ("pool", attacks_pool.PoolTarget, attacks_pool.ATTACKS),
              ("h1", attacks_h1.H1Target, attacks_h1.ATTACKS),
              ("fields", attacks_fields.FieldsTarget, attacks_fields.ATTACKS)]
    total_ok = total_fail = 0
    for label, factory, attacks in groups:
        ok, fail = run_group(binary, label, factory, attacks, only)
        total_ok += ok
        total_fail += fail
    print("battery: %d passed, %d failed (%s)" % (total_ok, total_fail, binary))
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
