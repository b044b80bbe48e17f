"""Write a run's results.md, charts and results.html again from its
results.json, with no new run (after a change to how they are written).

    python -m bench.render docs/results"""
import sys

from . import charts, html, report, results_file


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__.split('\n\n')[1] + '\n')
        return 2
    results = results_file.load(argv[0])
    print(report.write(results, argv[0]))
    print('\n'.join(charts.write(results, argv[0])))
    print(html.write(argv[0]))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
