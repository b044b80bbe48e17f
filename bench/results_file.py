"""A run's results.json, found in its folder: results.json, or for a run
whose record is too large for one text file in git, results.json.gz
(`gzip -9n results.json`, as docs/results is kept). Every command that
reads a run reads either."""
import gzip
import json
import os

NAME = 'results.json'


def path(where):
    """The results file of folder `where` (results.json, else its
    gzipped copy when only that is there), or `where` itself."""
    if not os.path.isdir(where):
        return where
    plain = os.path.join(where, NAME)
    if not os.path.exists(plain) and os.path.exists(plain + '.gz'):
        return plain + '.gz'
    return plain


def load(where):
    """The record of the run in folder `where` (or in that file)."""
    name = path(where)
    opener = gzip.open if name.endswith('.gz') else open
    with opener(name, 'rt', encoding='utf-8') as f:
        return json.load(f)


def save(where, text):
    """Write a run's record text where load found it, in its form."""
    name = path(where)
    if name.endswith('.gz'):
        with gzip.GzipFile(name + '.tmp', 'wb', mtime=0) as f:
            f.write(text.encode('utf-8'))
    else:
        with open(name + '.tmp', 'w', encoding='utf-8') as f:
            f.write(text)
    os.replace(name + '.tmp', name)
