"""The tools tests' checks: expect() prints each check and remembers the failed ones;
finish() reports them and exits non-zero if any failed."""
import sys

failures = []


def expect(cond, what, output=""):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)
        if output:
            print(output)


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")
