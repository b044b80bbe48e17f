"""Benchmark every engine: verify its pages, time them with wrk next to an
nginx reference, write results.json, results.md and charts.

    python bench.py [--engines A,B] [--pages P,Q] [--plain|--pipelined|--both]
                    [--quick] [--out DIR] ...   (see --help)
    python bench.py compare A B [--noise PCT] [--out FILE]
    python bench.py advise RESULTS --rate N [--slo p99=10ms] [--workload W]
    python bench.py cluster-batches [--out FILE]
    python bench.py merge PART PART... --out DIR
"""
import sys

from bench.cli import main

if __name__ == '__main__':
    if sys.argv[1:2] == ['compare']:
        from bench.compare import main as compare
        sys.exit(compare(sys.argv[2:]))
    if sys.argv[1:2] == ['advise']:
        from bench.advise import main as advise
        sys.exit(advise(sys.argv[2:]))
    if sys.argv[1:2] == ['merge']:
        from bench.merge import main as merge
        sys.exit(merge(sys.argv[2:]))
    if sys.argv[1:2] == ['cluster-batches']:
        from bench.cluster_batches import main as cluster_batches
        sys.exit(cluster_batches(sys.argv[2:]))
    sys.exit(main())
