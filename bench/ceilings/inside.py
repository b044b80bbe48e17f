"""The calls inside each database: Tarantool's stored functions in a loop
of fibers (fibers.lua, in a scratch instance of instance.lua holding the
same data set), PostgreSQL's under pgbench with a script per call."""
import json
import os
import secrets
import shutil
import subprocess
import tempfile
from urllib.parse import unquote, urlsplit

import dataset
from runtime.databases.tarantool import INSTANCE_LUA
from runtime.processes import free_port
from ..machine import postgres_binary
from . import BALLOT_TTL, RANKED_COUNT, SKIP_CALL, VISIT_BATCH

HERE = os.path.dirname(os.path.abspath(__file__))
FIBERS_LUA = os.path.join(HERE, 'fibers.lua')
# The site's calls as pgbench runs them, as the site's role. The vote
# script votes the pair its client issued the transaction before (the
# first vote of each client finds none), then issues the next.
TOKEN = 'substr(md5(random()::text), 1, 22)'
PGBENCH_SCRIPTS = {
    'pair': 'SELECT count(*) FROM sticker_pair(:session, %s, %s, %d);\n'
            % (TOKEN, TOKEN, BALLOT_TTL),
    'vote': 'SELECT cast_vote(:session, :win, :lose) AS outcome \\gset\n'
            'SELECT t.a AS win, t.b AS lose FROM (SELECT %s AS a, %s AS b) t,'
            ' LATERAL (SELECT count(*) FROM sticker_pair(:session, t.a, t.b,'
            ' %d)) p \\gset\n' % (TOKEN, TOKEN, BALLOT_TTL),
    'visits': "SELECT record_visits(ARRAY(SELECT gen_random_uuid()::text "
              "FROM generate_series(1, {n})), array_fill('127.0.0.1'::text, "
              "ARRAY[{n}]), array_fill('pgbench'::text, ARRAY[{n}]));\n"
              .format(n=VISIT_BATCH),
    'stats': 'SELECT site_stats();\n',
}
NO_CALL = 'SELECT 1;\n'
# A token of the right form that was never issued: the first vote's.
UNISSUED = 'A' * 22


def pgbench_script(call):
    if os.environ.get(SKIP_CALL):
        return NO_CALL
    if call == 'ranked':
        from data_interface.postgres.asyncpg_data import RANKED
        return RANKED[True] % RANKED_COUNT + ';\n'
    return PGBENCH_SCRIPTS[call]


def tarantool_fibers(calls, seconds, fibers, packs, pin, log):
    """{call: record} of fibers.lua in a scratch instance, pinned like the
    engines' databases; RuntimeError if it fails."""
    binary = shutil.which('tarantool')
    if binary is None:
        raise RuntimeError('tarantool is not installed')
    directory = tempfile.mkdtemp(prefix='stickers-ceilings-')
    try:
        chosen = dataset.generate(packs=packs)
        path = os.path.join(directory, 'data.json')
        with open(path, 'w') as f:
            json.dump({'packs': [list(p) for p in chosen.packs],
                       'stickers': [list(s) for s in chosen.stickers]}, f)
        env = dict(
            os.environ, TNT_DIR=directory, TNT_LOG=log,
            TNT_LISTEN='127.0.0.1:%d' % free_port(),
            TNT_APP_PASSWORD=secrets.token_hex(16),
            TNT_ADMIN_PASSWORD=secrets.token_hex(16),
            CEILINGS_INSTANCE=INSTANCE_LUA, CEILINGS_DATA=path,
            CEILINGS_CALLS=','.join(calls), CEILINGS_SECONDS=str(seconds),
            CEILINGS_FIBERS=str(fibers), CEILINGS_RANKED=str(RANKED_COUNT),
            CEILINGS_BATCH=str(VISIT_BATCH), CEILINGS_TTL=str(BALLOT_TTL),
            CEILINGS_SKIP=os.environ.get(SKIP_CALL, ''))
        done = subprocess.run(list(pin) + [binary, FIBERS_LUA], env=env,
                              cwd=directory, capture_output=True, text=True,
                              timeout=len(calls) * (seconds + 30) + 60)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith('{'):
            r = json.loads(line)
            found[r['call']] = r
    if done.returncode != 0 or not found:
        raise RuntimeError('fibers.lua exited with %d: %s' % (
            done.returncode, (done.stderr or done.stdout)[-500:]))
    return found


def pgbench(call, dsn, seconds, clients, pin, session):
    """(argv, finished pgbench process): `clients` connections as the
    site's role, one thread, prepared statements."""
    url = urlsplit(dsn)
    script = os.path.join(tempfile.mkdtemp(prefix='stickers-pgbench-'),
                          call + '.sql')
    with open(script, 'w') as f:
        f.write(pgbench_script(call))
    argv = list(pin) + [
        postgres_binary('pgbench'), '-n', '-M', 'prepared', '-f', script,
        '-c', str(clients), '-j', '1', '-T', str(seconds),
        '-D', 'session=' + session, '-D', 'win=' + UNISSUED,
        '-D', 'lose=' + UNISSUED[:-1] + 'B',
        '-h', url.hostname, '-p', str(url.port or 5432),
        '-U', unquote(url.username or ''), url.path.lstrip('/')]
    env = dict(os.environ, PGPASSWORD=unquote(url.password or ''),
               PGCONNECT_TIMEOUT='5')
    try:
        return argv, subprocess.run(argv, env=env, capture_output=True,
                                    text=True, timeout=seconds + 60)
    finally:
        shutil.rmtree(os.path.dirname(script), ignore_errors=True)


def pgbench_counts(output):
    """(transactions processed, failed, tps) from pgbench's report."""
    found = {}
    for line in output.splitlines():
        key, _, value = line.partition(':')
        if key.startswith('number of transactions actually processed'):
            found['done'] = int(value.split('/')[0])
        elif key.startswith('number of failed transactions'):
            found['failed'] = int(value.split()[0])
        elif line.startswith('tps = '):
            found['rate'] = float(line.split()[2])
    return found

