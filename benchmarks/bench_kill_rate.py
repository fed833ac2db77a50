"""Kill rate of the conformance kit on its own one-defect backends (mock_backends/one_defect/):
how many it catches under the requirement each one's header names, per requirement, and its false
alarms on the correct backends (one_defect/correct/ and the reference backend).

    python benchmarks/bench_kill_rate.py [--quick] [--whole-kit] [-k STEM]

By default each defect runs the cases of its own requirement (fast); --whole-kit runs every case
and also lists which other requirements fired. --quick runs the quick tier only.

Goal: 100% caught under the named requirement, 0 false alarms.
"""
import argparse
import os
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mock_backends  # noqa: E402
import reference_backend  # noqa: E402
from conformance import runner  # noqa: E402
from conformance.requirements import REQUIREMENTS  # noqa: E402


def finding(result):
    """FAIL, CRASH or TIMEOUT (an ERROR is the kit's own failure), or a WARNING of a requirement
    that only ever warns."""
    return result.status in ("FAIL", "CRASH", "TIMEOUT") or (
        result.status == "WARNING" and REQUIREMENTS[result.case.requirement].warning_only)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick tier only")
    parser.add_argument("--whole-kit", action="store_true", help="run every case on each defect")
    parser.add_argument("-k", dest="only", help="only defects whose stem contains this")
    args = parser.parse_args()
    cases = runner.select_cases(None, quick=args.quick)
    defects = {s: d for s, d in mock_backends.one_defect_backends().items()
               if not args.only or args.only in s}
    per_requirement = defaultdict(lambda: [0, 0])
    missed = []
    started = time.perf_counter()
    for stem, defect in defects.items():
        chosen = cases if args.whole_kit else [c for c in cases if c.requirement == defect.requirement]
        run = runner.Controller(defect.path, timeout=10.0).run(chosen)
        fired = sorted({r.case.requirement for r in run.results if finding(r)})
        hit = defect.requirement in fired
        per_requirement[defect.requirement][1] += 1
        per_requirement[defect.requirement][0] += hit
        if not hit:
            missed.append(stem)
        first = next((r for r in run.results
                      if finding(r) and r.case.requirement == defect.requirement), None)
        print(f"{'caught' if hit else 'MISSED':6}  {defect.requirement:8} {stem:40} "
              + (f"{first.case.id}: {first.status} {first.message[:110]!r}" if first else "")
              + (f"  [also: {', '.join(r for r in fired if r != defect.requirement)}]"
                 if args.whole_kit and len(fired) > 1 else ""))
    false_alarms = []
    correct = {"reference": reference_backend.LIBRARY_PATH, **mock_backends.correct_backends()}
    for name, path in correct.items():
        run = runner.Controller(path, timeout=10.0).run(cases)
        alarms = [r for r in run.results if r.status not in ("PASS", "NOT_SUPPORTED")]
        false_alarms += [(name, r.case.id, r.status, r.message[:100]) for r in alarms]
        print(f"correct {name:12} {'conformant' if run.conformant else 'NOT CONFORMANT'}, "
              f"{len(alarms)} findings, {run.seconds:.2f} s")
    total = sum(t for _, t in per_requirement.values())
    killed = sum(c for c, _ in per_requirement.values())
    print()
    for requirement in sorted(per_requirement):
        c, t = per_requirement[requirement]
        print(f"  {requirement:8} {c}/{t}")
    print(f"kill rate: {killed}/{total} = {100 * killed / max(total, 1):.0f}% under the named "
          f"requirement ({'quick' if args.quick else 'full'} tier); missed: {', '.join(missed) or 'none'}")
    print(f"false alarms on {len(correct)} correct backends: {len(false_alarms)}"
          + "".join(f"\n  {a}" for a in false_alarms))
    print(f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
