"""Command line: write the sticker pictures, or check a dump.

    python -m dataset images --root var/img [--packs N] [--seed S]
    python -m dataset check FILE.json

Exit status 0 on success, 2 on bad input.
"""
import argparse
import sys
import time

from . import generate, write_images, read_dump, DumpError


def count(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError('must be >= 0, got %s' % text)
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m dataset',
        description='The generated sticker data set and real dumps.')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    images = sub.add_parser(
        'images', help='write the SVG pictures of the generated data set')
    images.add_argument('--root', required=True,
                        help='folder to write {pack}/{n}.svg into '
                             '(served as /img)')
    images.add_argument('--packs', type=count, default=300,
                        help='number of packs (default 300)')
    images.add_argument('--seed', type=int, default=1717,
                        help='random seed (default 1717)')
    check = sub.add_parser('check', help='validate a JSON dump')
    check.add_argument('file', help='the dump, see dataset.dump')
    args = parser.parse_args(argv)

    if args.command == 'images':
        started = time.time()
        try:
            written = write_images(args.root, args.packs, args.seed)
        except (IOError, OSError) as e:
            print('error: cannot write under %s: %s' % (args.root, e),
                  file=sys.stderr)
            return 2
        total = len(generate(args.packs, args.seed).stickers)
        print('%d of %d images written to %s in %.2fs' % (
            written, total, args.root, time.time() - started))
        return 0
    try:
        data = read_dump(args.file)
    except DumpError as e:
        print('error: %s' % e, file=sys.stderr)
        return 2
    print('%s: ok, %d packs, %d stickers' % (
        args.file, len(data.packs), len(data.stickers)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
