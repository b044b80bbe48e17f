"""A local Redis Cluster with its data under var/rediscluster, for when no
--rediscluster address is given: three primaries and three replicas on
loopback ports PORT..PORT+5 (their cluster bus +10000), each a redis-server
in cluster mode with its own directory (node0..node5: append-only file,
fsynced as the single Redis's, nodes.conf), made into one cluster by
redis-cli --cluster create at the first start. The accounts are the single
Redis's two and sticker_cluster (replication, redis-cli), with random
passwords kept in DIRECTORY/USER.password (0600).

Each node is watched and restarted on its own, like the single Redis
(runtime/databases/__init__.py): a killed primary's replica takes over
after cluster-node-timeout, and the restarted node rejoins as a replica
from its nodes.conf."""
import logging
import os
import shutil
import subprocess
import time

import redis as redis_py
from redis.crc import key_slot

from data_interface.rediscluster.accounts import CLUSTER_USER, acl_lines
from data_interface.rediscluster.address import ClusterAddress
from data_interface.rediscluster.cluster_data import CATALOGUE
from ..processes import bindable, client_ports, free_port, lowest_server_port
from ..settings import DEFAULTS
from . import files
from .files import secret
from .redis import ManagedRedis

log = logging.getLogger('rediscluster')

NODES, REPLICAS = 6, 1
SLOTS = 16384
# Milliseconds a primary may not answer before its replica takes over.
NODE_TIMEOUT = 2000

CLUSTER_CONFIG = """cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout {timeout}
# The buckets on the shards that answer keep serving while one fails over.
cluster-require-full-coverage no
# Its pings move the replicas' offsets: CLUSTER SLOTS lists a replica (and
# a client knows there is one to wait for) once its offset is not 0.
repl-ping-replica-period 1
masteruser {user}
masterauth {password}
"""


class ManagedNode(ManagedRedis):
    """One node of the cluster, in DIRECTORY/nodeN on PORT+N."""
    option = '--rediscluster'

    def __init__(self, cluster, index):
        self.name = 'Redis Cluster node %d' % index
        self.cluster = cluster
        super().__init__(os.path.join(cluster.directory, 'node%d' % index),
                         host=cluster.host, port=cluster.port + index,
                         memory=cluster.memory, settings=cluster.settings)

    def _password(self, user):
        return self.cluster.password(user)

    def _config(self):
        text = self._settings() + CLUSTER_CONFIG.format(
            timeout=NODE_TIMEOUT, user=CLUSTER_USER,
            password=self.cluster.password(CLUSTER_USER))
        users = acl_lines(*[self.cluster.password(u)
                            for u in self.cluster.users])
        path = os.path.join(self.directory, 'redis.conf')
        files.write(path, text + '\n'.join(users) + '\n')
        return path


class ManagedCluster:
    """The six nodes; start() starts them and makes or waits for the
    cluster, stop() stops them."""
    name = 'Redis Cluster'
    option = '--rediscluster'

    def __init__(self, directory, port=None, settings=DEFAULTS,
                 passwords=None):
        self.directory = os.path.abspath(directory)
        self.settings = settings
        self.host = settings.db_host
        self.port = port or settings.rediscluster_port
        # Three primaries and their replicas share the single Redis's
        # memory setting.
        self.memory = settings.redis_memory // NODES
        self.users = settings.app_user, settings.admin_user, CLUSTER_USER
        self.passwords = passwords or {}
        self.nodes = [ManagedNode(self, i) for i in range(NODES)]

    def password(self, user):
        return self.passwords.get(user) or secret(
            os.path.join(self.directory, user + '.password'), create=True)

    def _address(self, user):
        return ClusterAddress(
            self.host, self.port, user, self.password(user),
            tuple('%s:%d' % (self.host, n.port) for n in self.nodes))

    @property
    def address(self):
        return self._address(self.users[0])

    @property
    def admin_address(self):
        return self._address(self.users[1])

    def prepare(self):
        """The directory, and the ports it was made on: each node's
        nodes.conf names the others by port, so a cluster made on some ports
        cannot start on others (RuntimeError)."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        files.tighten(self.directory)
        path = os.path.join(self.directory, 'port')
        try:
            made = int(files.read(path).strip())
        except (OSError, ValueError):
            files.write(path, '%d\n' % self.port)
            return
        if made != self.port:
            raise RuntimeError(
                'the Redis Cluster in %s was made on ports %d-%d, not %d-%d: '
                'set STICKERS_REDISCLUSTER_PORT=%d, or remove that directory '
                'for a new cluster' % (self.directory, made, made + NODES - 1,
                                       self.port, self.port + NODES - 1,
                                       made))

    def start(self):
        """Start every node, then make the cluster (blocking)."""
        self.prepare()
        for node in self.nodes:
            node.start()
        self.form()

    def stop(self):
        for node in reversed(self.nodes):
            node.stop()

    def client(self, node):
        return redis_py.Redis(host=self.host, port=node.port,
                              username=CLUSTER_USER,
                              password=self.password(CLUSTER_USER),
                              decode_responses=True, socket_timeout=5)

    def info(self, node):
        with self.client(node) as c:
            return c.cluster('INFO')

    def form(self, timeout=60.0):
        """Make the cluster if its slots are not assigned yet, then wait
        until every node says it is ok and each primary's replica is in
        sync (before that, a vote could not be acknowledged by one)."""
        if int(self.info(self.nodes[0]).get('cluster_slots_assigned',
                                            0)) < SLOTS:
            self._create()
        deadline = time.monotonic() + timeout
        while not self.settled():
            if time.monotonic() > deadline:
                raise RuntimeError('%s in %s did not settle in %.0f s: %s'
                                   % (self.name, self.directory, timeout,
                                      self.nodes_line()))
            time.sleep(0.1)

    def nodes_line(self, node=None):
        """CLUSTER NODES as one node sees it: [(port, flags, slots)]."""
        with self.client(node or self.nodes[0]) as c:
            text = c.execute_command('CLUSTER', 'NODES')
        rows = []
        for line in text.splitlines():
            fields = line.split()
            port = int(fields[1].split('@')[0].rsplit(':', 1)[1])
            rows.append((port, fields[2], fields[8:]))
        return rows

    def primaries(self):
        """The nodes that serve slots now."""
        ports = {port for port, flags, slots in self.nodes_line()
                 if 'master' in flags and slots}
        return [n for n in self.nodes if n.port in ports]

    def settled(self):
        for node in self.nodes:
            s = self.info(node)
            if (s.get('cluster_state') != 'ok'
                    or int(s.get('cluster_slots_assigned', 0)) != SLOTS
                    or int(s.get('cluster_known_nodes', 0)) != NODES):
                return False
        rows = self.nodes_line()
        if any('fail' in flags for _, flags, _ in rows) or sum(
                'slave' in flags for _, flags, _ in rows) != NODES - NODES // 2:
            return False
        for node in self.primaries():
            with self.client(node) as c:
                replication = c.info('replication')
            if replication.get('slave0', {}).get('state') != 'online':
                return False
        for node in self.nodes:
            with self.client(node) as c:
                ranges = c.execute_command('CLUSTER', 'SLOTS')
            if any(len(r) < 4 for r in ranges):    # no replica listed
                return False
        return True

    def _create(self):
        log.info('making a Redis Cluster of %s:%d-%d', self.host, self.port,
                 self.port + NODES - 1)
        self.cli('create', *['%s:%d' % (self.host, n.port)
                             for n in self.nodes]
                 + ['--cluster-replicas', str(REPLICAS), '--cluster-yes'])

    def roles(self):
        """{port: role} of every node: 'rankings' for the primary of the
        catalogue's slot ({c}), 'shard' for the other primaries, and
        'rankings-replica' or 'shard-replica' for their replicas."""
        with self.client(self.nodes[0]) as c:
            rows = [line.split() for line in
                    c.execute_command('CLUSTER', 'NODES').splitlines()]
        catalogue = key_slot(CATALOGUE.encode() + b'ratings')
        port = {f[0]: int(f[1].split('@')[0].rsplit(':', 1)[1]) for f in rows}

        def holds(ranges):
            for r in ranges:
                if not r.startswith('['):
                    low, _, high = r.partition('-')
                    if int(low) <= catalogue <= int(high or low):
                        return True
            return False
        roles = {port[f[0]]: 'rankings' if holds(f[8:]) else 'shard'
                 for f in rows if 'master' in f[2].split(',')}
        for f in rows:
            if 'slave' in f[2].split(','):
                roles[port[f[0]]] = roles.get(port.get(f[3]), 'shard') + \
                    '-replica'
        return roles

    def node_id(self, node):
        with self.client(node) as c:
            return c.execute_command('CLUSTER', 'MYID')

    def reshard(self, source, target, slots):
        """Move `slots` slots (the lowest source holds) from the primary
        `source` to the primary `target`, keys and all, while the cluster
        serves (redis-cli --cluster reshard)."""
        self.cli('reshard', '%s:%d' % (self.host, source.port),
                 '--cluster-from', self.node_id(source),
                 '--cluster-to', self.node_id(target),
                 '--cluster-slots', str(slots), '--cluster-yes')

    def cli(self, command, *args, timeout=300):
        """redis-cli --cluster COMMAND ARGS as sticker_cluster."""
        binary = shutil.which('redis-cli')
        if binary is None:
            raise RuntimeError('redis-cli is not installed: run ./run.sh '
                               'setup (or apt-get install redis-tools)')
        # The password in the environment, never on a command line.
        env = dict(os.environ, REDISCLI_AUTH=self.password(CLUSTER_USER))
        done = subprocess.run(
            [binary, '--user', CLUSTER_USER, '--cluster', command] + list(args),
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError('redis-cli --cluster %s failed: %s' % (
                command, done.stdout.decode(errors='replace')[-500:]))
        return done.stdout.decode(errors='replace')


def free_cluster_port():
    """A first port whose five above it and their cluster bus ports
    (+10000) are free, all below the ports free_port() gives and the OS's
    clients' ports: no server and no client can take a node's port, or its
    bus port, while the node is down."""
    def fits(port):
        return port + 10000 + NODES <= 65536 and all(
            bindable('127.0.0.1', port + k)
            and bindable('127.0.0.1', port + 10000 + k) for k in range(NODES))
    top = lowest_server_port(client_ports()[0]) - 10000 - NODES
    while True:
        port = free_port(span=(1024, top), fits=fits)
        if fits(port):
            return port
