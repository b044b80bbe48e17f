"""Benchmark every engine: verify its pages, time them with wrk next to an
nginx reference, write results.json, results.md and charts.

    python bench.py [--engines A,B] [--pages P,Q] [--plain|--pipelined|--both]
                    [--quick] [--out DIR] ...   (see --help)
"""
import sys

from bench.cli import main

if __name__ == '__main__':
    sys.exit(main())
