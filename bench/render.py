"""Write a run's results.md, charts and results.html again from its
results.json, with no new run (after a change to how they are written).

    python -m bench.render docs/results"""
import json
import os
import sys

from . import charts, html, report


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__.split('\n\n')[1] + '\n')
        return 2
    with open(os.path.join(argv[0], 'results.json')) as f:
        results = json.load(f)
    print(report.write(results, argv[0]))
    print('\n'.join(charts.write(results, argv[0])))
    print(html.write(argv[0]))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
