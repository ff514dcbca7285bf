"""`make bench`: the speed ratios of bench/bench_speed.py (arguments: the benchmarks to run, by name).
The risk validation study is validation/ (`make validate`)."""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv = [sys.argv[0], *sys.argv[1:]]
    runpy.run_path(str(Path(__file__).with_name("bench_speed.py")), run_name="__main__")
