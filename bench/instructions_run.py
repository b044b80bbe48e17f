"""bench.py --instructions: count the engines and pages asked (see
bench/instructions.py) and write results.json, results.md and results.html."""
import json
import os
import sys
import time

from . import html, machine, report
from .instructions import WARMUP, RequestFailed, measure, version
from .references import of_engine


def bench(args):
    """Count the engines and pages of a bench.py --instructions run; write
    results.json, results.md and results.html in args.out."""
    os.makedirs(os.path.join(args.out, 'logs'), exist_ok=True)
    results = {'started': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
               'settings': {'engines': [e.name for e in args.runnable],
                            'pages': args.pages, 'modes': [],
                            'n1': args.requests[0], 'n2': args.requests[1],
                            'warmup': WARMUP},
               'targets': [], 'runs': [], 'instructions': [],
               'valgrind': version()}
    results.update(machine.describe())
    status = 0
    counted = [(e.name, args.pages, args.where[e.name][0].python)
               for e in args.runnable]
    if 'ugly' in args.pages:    # each engine's bare hello world, on /ugly
        hellos = {of_engine(name): python for name, _, python in counted}
        counted += [(h, ['ugly'], python) for h, python in hellos.items() if h]
    for name, pages, python in counted:
        try:
            results['instructions'] += measure(
                name, pages, args.requests[0], args.requests[1],
                folder=os.path.join(args.out, 'logs'), python=python,
                say=lambda line: print(line, file=sys.stderr))
        except (RuntimeError, RequestFailed, OSError) as err:
            print('%s: %s' % (name, err), file=sys.stderr)
            results['instructions'].append({'engine': name, 'failed': str(err)})
            status = 1
    results['finished'] = time.strftime('%Y-%m-%dT%H:%M:%S%z')
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)
    markdown = report.write(results, args.out)
    print('results: %s\n         %s\n         %s' % (
        os.path.join(args.out, 'results.json'), markdown, html.write(args.out)))
    return status
