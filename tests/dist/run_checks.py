"""What the two-GPU check scripts share (two_gpus_match_one.sh, gpt_two_gpus_match_one.sh): the
relative difference of two figures and a verdict line per check, remembered for the exit status."""


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


class Checks:
    def __init__(self, mode):
        self.mode = mode
        self.ok = True

    def check(self, name, worst, tol):
        verdict = "ok" if worst <= tol else "FAIL"
        self.ok = self.ok and worst <= tol
        print(f"{self.mode}: {name}: max relative difference {worst:.3e} (tolerance {tol:g}) {verdict}")

    def require(self, name, holds):
        self.ok = self.ok and holds
        print(f"{self.mode}: {name}:", "yes" if holds else "NO: FAIL")
