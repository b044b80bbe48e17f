"""The interpreter axis: CPythons found where run.sh finds them (pyenv's
versions, then PATH), each with its own environment made from the pinned
requirements, and which engines each can run.

    python -m bench.pythons 3.12,3.13     make their environments
"""
import glob
import hashlib
import json
import os
import re
import subprocess
import tempfile
import sys
import time
from collections import namedtuple

from runtime.engines import LEGACY
from runtime.settings import ROOT

# version: 'X.Y.Z'; python: the interpreter of its environment.
Interpreter = namedtuple('Interpreter', 'version python')
MAIN = Interpreter(sys.version.split()[0], sys.executable)
NOT_BUILT = 'missing.json'      # in an environment: package -> pip's reason
STAMP = '.installed'
# Asks an interpreter, run in the checkout, what each engine needs there.
ASK = ('import json; from runtime import engines; print(json.dumps('
       '{e.name: [engines.runs_here(e), engines.unavailable(e)] '
       'for e in engines.ENGINES}))')


def short(version):
    """'3.12.1' -> '3.12'."""
    return '.'.join(version.split('.')[:2])


def version_key(version):
    """'3.10.13' sorts after '3.9.18'."""
    return [int(x) if x.isdigit() else 0 for x in version.split('.')]


def version_of(python):
    done = subprocess.run([python, '-c', 'import sys; print(sys.version.split()[0])'],
                          capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise LookupError('%s does not run: %s' % (python, done.stderr.strip()))
    return done.stdout.strip()


def find(spec):
    """The CPython a version ('3.12') or a path names."""
    if os.sep in spec:
        if not os.access(spec, os.X_OK):
            raise LookupError('%s is not an executable' % spec)
        return os.path.abspath(spec)
    parts = spec.split('.')
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise LookupError('%r is neither a version like 3.12 nor a path' % spec)
    pyenv = os.environ.get('PYENV_ROOT') or os.path.expanduser('~/.pyenv')
    builds = glob.glob(os.path.join(pyenv, 'versions', spec + '.*', 'bin',
                                    'python' + spec))
    # The newest pyenv build first, then PATH's.
    builds.sort(key=lambda p: version_key(p.split(os.sep)[-3]), reverse=True)
    builds += [os.path.join(d, 'python' + spec)
               for d in os.environ.get('PATH', '').split(os.pathsep) if d]
    for python in builds:
        if os.access(python, os.X_OK):
            return python
    raise LookupError('no Python %s found (pyenv install %s, or put '
                      'python%s on PATH)' % (spec, spec, spec))


def requirements(version):
    """The pins an interpreter's environment is made from."""
    major_minor = tuple(int(x) for x in version.split('.')[:2])
    return 'requirements.txt' if major_minor >= (3, 10) else 'requirements-legacy.txt'


def directory(version):
    return LEGACY if short(version) == '3.7' else os.path.join(
        ROOT, '.venv-' + short(version))


def stamp(version, pins):
    """What run.sh's make_venv writes too: the pins' hash and the version."""
    with open(os.path.join(ROOT, pins), 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    return '%s-Python%s' % (digest, version)


def pip_reason(pin, output):
    """pip's one-line reason why a pin did not install."""
    version = pin.split('==')[-1]
    needs = re.search(r'(?:^|[ ;])%s Requires-Python ([^;\s]+)' % re.escape(version),
                      output)
    if needs:
        return '%s needs Python %s' % (pin, needs.group(1))
    lines = [x.strip() for x in output.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith('ERROR:')] or lines or ['pip failed']
    return errors[-1].replace('ERROR: ', '')[:200]


def pins(path):
    with open(path) as f:
        return [x.split('#')[0].strip() for x in f if x.split('#')[0].strip()]


def unmet(path):
    """The pins marked `# no-deps`: their own requirements are not the
    pins' (robyn asks for another uvloop than the one pinned, and runs on
    it), so they go in alone, after the rest."""
    with open(path) as f:
        return [x.split('#')[0].strip() for x in f if '# no-deps' in x]


def install(env_python, pins_file, say):
    """Install the pins; where that fails, each alone, then with what it
    needs here (held to the pins), noting which ones have no build for this
    interpreter and why."""
    pip = [env_python, '-m', 'pip', 'install', '--disable-pip-version-check']
    missing, held = {}, {}
    alone_pins = unmet(pins_file)
    with tempfile.NamedTemporaryFile('w', suffix='.txt') as rest:
        rest.write(''.join(p + '\n' for p in pins(pins_file)
                           if p not in alone_pins))
        rest.flush()
        failed = subprocess.run(pip + ['-q', '-r', rest.name],
                                capture_output=True).returncode
    if not failed and alone_pins:
        failed = subprocess.run(pip + ['-q', '--no-deps'] + alone_pins,
                                capture_output=True).returncode
    if failed:
        wanted = pins(pins_file)
        say('  not all of them install here: one at a time')
        for i, pin in enumerate(wanted, 1):
            name = pin.split('==')[0].lower()
            alone = subprocess.run(pip + ['-q', '--no-deps', pin],
                                   capture_output=True, text=True)
            if alone.returncode:
                missing[name] = pip_reason(pin, alone.stderr + alone.stdout)
            elif pin in alone_pins:
                continue
            else:
                done = subprocess.run(pip + ['-c', pins_file, pin],
                                      capture_output=True, text=True)
                if done.returncode == 0:
                    continue
                subprocess.run([env_python, '-m', 'pip', 'uninstall', '-y', '-q',
                                name], capture_output=True)
                held[name] = re.findall(r'\(constraint\) ([A-Za-z0-9._-]+)==',
                                        done.stdout + done.stderr)
                missing[name] = pip_reason(pin, done.stderr + done.stdout)
            say('  [%d/%d] %s: %s' % (i, len(wanted), pin, missing[name]))
    # A pin held back by another that has no build: say which, and why.
    for name, needed in held.items():
        for other in needed:
            if other.lower() in missing and other.lower() != name:
                missing[name] = 'needs %s: %s' % (other, missing[other.lower()])
                break
    return missing


def environment(python, say):
    """Make (or keep) the environment of an interpreter: its Interpreter."""
    version = version_of(python)
    if short(version) == short(MAIN.version):
        return MAIN
    target = directory(version)
    pins_file = requirements(version)
    wanted = stamp(version, pins_file)
    env_python = os.path.join(target, 'bin', 'python')
    try:
        with open(os.path.join(target, STAMP)) as f:
            if f.read().strip() == wanted and os.access(env_python, os.X_OK):
                return Interpreter(version, env_python)
    except OSError:
        pass
    make(target, python, version, pins_file, say)
    return Interpreter(version, env_python)


def make(target, python, version, pins_file, say):
    """A new environment in target: the pins that have a build for this
    interpreter installed, missing.json naming the others and why."""
    started = time.monotonic()
    say('creating %s with Python %s from %s (%d packages)' % (
        target, version, pins_file, len(pins(os.path.join(ROOT, pins_file)))))
    subprocess.run(['rm', '-rf', target], check=True)
    subprocess.run([python, '-m', 'venv', target], check=True)
    missing = install(os.path.join(target, 'bin', 'python'),
                      os.path.join(ROOT, pins_file), say)
    with open(os.path.join(target, NOT_BUILT), 'w') as f:
        json.dump(missing, f, indent=1, sort_keys=True)
    with open(os.path.join(target, STAMP), 'w') as f:
        f.write(stamp(version, pins_file) + '\n')
    say('  ready in %.0f s%s' % (
        time.monotonic() - started,
        '; no build here for ' + ', '.join(sorted(missing)) if missing else ''))


def engines_on(interpreter):
    """{engine name: [runs_here, why not in this interpreter or None]}:
    runs_here is 'yes', 'via .venv37 (Python 3.7)' or 'no: why'."""
    if interpreter == MAIN:
        from runtime import engines
        return {e.name: [engines.runs_here(e), engines.unavailable(e)]
                for e in engines.ENGINES}
    done = subprocess.run([interpreter.python, '-c', ASK], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        raise LookupError('Python %s cannot read the engines: %s' % (
            interpreter.version, (done.stderr.strip().splitlines() or ['?'])[-1]))
    return json.loads(done.stdout)


def legacy():
    """The legacy environment's interpreter (japronto, aiotarantool)."""
    python = os.path.join(LEGACY, 'bin', 'python')
    try:
        return Interpreter(version_of(python), python)
    except (LookupError, OSError):
        return Interpreter('3.7', python)


def label(name, interpreter, several):
    """An engine's or reference's name in a run: with '@3.12' when the run
    has several interpreters."""
    return name + '@' + short(interpreter.version) if several else name


def say(message):
    print(message, file=sys.stderr, flush=True)


def prepare(specs, say=say):
    """Interpreters for specs ('3.12' or paths), environments made."""
    found = []
    for spec in specs:
        interpreter = environment(find(spec), say)
        if any(short(i.version) == short(interpreter.version) for i in found):
            raise LookupError('two interpreters of Python %s: give one per '
                              'version' % short(interpreter.version))
        found.append(interpreter)
    return found


def main(argv):
    if len(argv) != 1 or argv[0].startswith('-'):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        interpreters = prepare([x for x in argv[0].split(',') if x.strip()])
    except (LookupError, subprocess.CalledProcessError) as e:
        say('error: %s' % e)
        return 1
    for interpreter in interpreters:
        status = engines_on(interpreter).values()
        say('Python %s (%s): %d engines run here' % (
            interpreter.version, interpreter.python,
            sum(1 for s, _ in status if s == 'yes')))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
