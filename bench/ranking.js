// advise's ranking in results.html, from the data the page embeds
// (bench/advise.py's embedded()): the same arithmetic as bench/advise.py,
// bench/latency/demand.py and bench/sizing.py, kept alike by
// tests/test_results_page.py. Plain JavaScript, nothing fetched.
(function () {
  'use strict';
  var THREAD = {tarantool: 'transaction thread', redis: 'main thread'};
  var NAMES = {tarantool: 'Tarantool', redis: 'Redis', postgres: 'PostgreSQL'};
  var FIELDS = ['server_us', 'serial_us', 'spread_us', 'replicas_us', 'written_bytes',
                'shards_us', 'shards'];

  function known(v) { return v !== null && v !== undefined; }

  function median(values) {
    var xs = values.filter(known).slice().sort(function (a, b) { return a - b; });
    if (!xs.length) return null;
    var m = xs.length >> 1;
    return xs.length % 2 ? xs[m] : (xs[m - 1] + xs[m]) / 2;
  }

  // budget.bracket: the highest kept rate below the lowest missed one
  function bracket(points) {
    var held = new Map();
    points.forEach(function (p) { held.set(p[0], (held.get(p[0]) || false) || p[1]); });
    var hi = null, lo = null;
    held.forEach(function (kept, rate) { if (!kept && (hi === null || rate < hi)) hi = rate; });
    held.forEach(function (kept, rate) {
      if (kept && (hi === null || rate < hi) && (lo === null || rate > lo)) lo = rate;
    });
    return [lo, hi];
  }

  function keeps(p, ms) { return p.ok && known(p.p) && p.p <= ms; }

  function runs(engine) {
    var found = new Map();
    engine.points.forEach(function (p) {
      if (!found.has(p.k)) found.set(p.k, []);
      found.get(p.k).push(p);
    });
    return Array.from(found.values());
  }

  function capacity(engine, ms, own) {
    if (own) return engine.cap ? median(engine.cap) : null;
    if (!engine.points.length) return null;
    return median(runs(engine).map(function (points) {
      return bracket(points.map(function (p) { return [p.o, keeps(p, ms)]; }))[0] || 0;
    }));
  }

  function atCapacity(engine, ms) {
    var chosen = [], rates = [];
    runs(engine).forEach(function (points) {
      var lo = bracket(points.map(function (p) { return [p.o, keeps(p, ms)]; }))[0];
      if (lo === null) return;
      rates.push(lo);
      points.forEach(function (p) { if (p.o === lo && keeps(p, ms)) chosen.push(p); });
    });
    var ds = chosen.filter(function (p) { return p.d; }).map(function (p) { return p.d; });
    if (!ds.length) return null;
    var d = {};
    FIELDS.forEach(function (f) { d[f] = median(ds.map(function (x) { return x[f]; })); });
    var splits = ds.map(function (x) { return x.split; });
    d.split = splits.indexOf(null) >= 0 ? null
      : splits.indexOf('estimated') >= 0 ? 'estimated' : 'measured';
    d.share = median(chosen.map(function (p) { return p.s; }));
    d.rate = median(rates);
    return d;
  }

  function coresFor(rate, us, u) { return us ? Math.ceil(rate * us / 1e6 / u - 1e-9) : 0; }

  function pct(v) { return Math.round(v * 100); }

  // budget.label
  function label(percentile, ms) {
    return percentile + ' ≤ ' + (ms >= 1 ? ms + ' ms' : (ms * 1000) + ' µs');
  }

  // sizing.cluster
  function cluster(rate, d, data, memory) {
    var u = d.share, notes = [];
    var app = Math.max(1, coresFor(rate, d.server_us, u));
    var rankings = rate * (d.serial_us || 0) / 1e6;
    var reads = d.replicas_us;
    var readers = Math.max(1, coresFor(rate, reads, u));
    var shards = Math.max(1, coresFor(rate, d.shards_us, u));
    var dbCores = 1 + readers + 2 * shards;
    var tiers = [['app', rate * d.server_us / 1e6 / app], ["rankings' shard", rankings],
                 ["rankings' replicas", rate * (reads || 0) / 1e6 / readers],
                 ['bucket shards', rate * d.shards_us / 1e6 / shards]];
    var busiest = tiers[0];
    tiers.forEach(function (t) { if (t[1] > busiest[1]) busiest = t; });
    var total = app + dbCores, cores = total;
    if (rankings > u) {
      notes.push("the rankings' shard: its main thread would be " + pct(rankings) +
                 ' % busy (the run kept the budget with its core ' + pct(u) +
                 " % busy): a cluster spreads the visitors' data and the reads, " +
                 "not the votes' applies");
      cores = null;
    } else if (total > data.max_cores) {
      notes.push('needs ' + total + ' cores, more than --max-cores ' + data.max_cores);
      cores = null;
    }
    notes.push(known(reads) ? "a bucket shard's replica, a core each: assumed, not measured"
               : 'a replica per primary, a core each: assumed, not measured');
    var mem = null;
    if (memory && memory.server_kib) {
      mem = app * memory.server_kib +
        (memory.database_kib || 0) * dbCores / (2 * (d.shards || 1));
    }
    return {app: app, total: total, cores: cores, busiest: busiest, notes: notes,
            database: 'rankings + ' + readers + ' replica' + (readers > 1 ? 's' : '') + ', ' +
              shards + ' bucket shard' + (shards > 1 ? 's' : '') + ' + a replica each, ' +
              dbCores + ' cores',
            memory_kib: mem, monthly: cores ? cores * data.hours * data.price : null};
  }

  // sizing.size
  function size(rate, d, data, replica, memory) {
    var u = d.share, kind = d.database, notes = [];
    if (kind === 'rediscluster' && known(d.shards_us)) return cluster(rate, d, data, memory);
    var app = Math.max(1, coresFor(rate, d.server_us, u));
    var serial = rate * (d.serial_us || 0) / 1e6;
    var spreadUs = d.spread_us || 0;
    var serialKind = (kind in THREAD) && known(d.serial_us);
    var replicas = 0, blocked = null;
    if (serialKind && serial > u) {
      var onReplicas = replica && rate * (replica.serial_us || 0) / 1e6;
      if (replica && onReplicas <= u && replica.replicas_us) {
        replicas = Math.max(1, coresFor(rate, replica.replicas_us, u));
        serial = onReplicas;
        spreadUs = replica.spread_us || 0;
      } else {
        blocked = 'one ' + (NAMES[kind] || kind) + ' primary: its ' + THREAD[kind] +
          ' would be ' + (d.split === 'estimated' ? 'up to ' : '') + pct(serial) +
          ' % busy (the run kept the budget with its core ' + pct(u) +
          ' % busy): shard the writes' +
          (replica ? '' : '; read replicas not measured in this run');
      }
    }
    var spread, dbCores;
    if (serialKind) { spread = coresFor(rate, spreadUs, u); dbCores = 1 + spread; }
    else { spread = kind ? Math.max(1, coresFor(rate, spreadUs, u)) : 0; dbCores = spread; }
    var tiers = [['app', rate * d.server_us / 1e6 / app]];
    if (serialKind) tiers.push([THREAD[kind], serial]);
    if (spread) tiers.push([serialKind ? 'database, other threads' : 'database',
                            rate * spreadUs / 1e6 / spread]);
    if (replicas) tiers.push(['replicas', rate * replica.replicas_us / 1e6 / replicas]);
    var busiest = tiers[0];
    tiers.forEach(function (t) { if (t[1] > busiest[1]) busiest = t; });
    var total = app + dbCores + replicas, cores = total;
    if (blocked) { notes.push(blocked); cores = null; }
    else if (total > data.max_cores) {
      notes.push('needs ' + total + ' cores, more than --max-cores ' + data.max_cores);
      cores = null;
    }
    if (kind && !serialKind && dbCores > 1) {
      notes.push((NAMES[kind] || kind) + ' on ' + dbCores + ' cores, measured on one: its WAL ' +
                 'writer and the row locks of votes on the same stickers are serial points ' +
                 'this does not measure');
    }
    var mem = null;
    if (memory && memory.server_kib) {
      mem = app * memory.server_kib + (memory.database_kib || 0) * (1 + replicas);
    }
    var what = replicas ? 'primary + ' + replicas + ' replica' + (replicas > 1 ? 's' : '')
      : '1 primary';
    var n = dbCores + replicas;
    return {app: app, database: kind ? what + ', ' + n + ' core' + (n > 1 ? 's' : '') : '–',
            total: total, cores: cores, busiest: busiest, notes: notes, memory_kib: mem,
            monthly: cores ? cores * data.hours * data.price : null};
  }

  function rank(data, rate, ms) {
    var own = data.slo.percentile === 'p99' && Math.abs(data.slo.ms - ms) < 1e-9;
    var byName = {};
    data.engines.forEach(function (e) { byName[e.name] = e; });
    var rows = [];
    data.engines.forEach(function (e) {
      var cap = capacity(e, ms, own);
      if (cap === null) return;
      var perCore = (cap || 0) / data.workers;
      var d = atCapacity(e, ms);
      if (d && d.share && d.server_us && perCore) {
        d.database = e.database;
        d.share = Math.min(1, d.share / data.workers);
        var replica = null;
        e.replicas.forEach(function (name) {
          if (replica) return;
          var r = byName[name] && atCapacity(byName[name], ms);
          if (r && r.replicas_us) replica = r;
        });
        if (e.tagged) replica = d;
        var site = size(rate, d, data, replica, e.memory);
        site.engine = e.name; site.per_core = perCore;
        rows.push(site);
        return;
      }
      var cores = perCore ? Math.ceil(rate / perCore) : null;
      var notes = [];
      if (!perCore) notes.push('kept the budget at no rate tried');
      else if (cores > data.max_cores) {
        notes.push('needs ' + cores + ' cores, more than --max-cores ' + data.max_cores);
        cores = null;
      }
      var mem = e.memory && cores ? cores * e.memory.server_kib + (e.memory.database_kib || 0) : null;
      rows.push({engine: e.name, per_core: perCore, app: cores, database: '–',
                 cores: cores, busiest: null, notes: notes, memory_kib: mem,
                 monthly: cores ? cores * data.hours * data.price : null});
    });
    rows.sort(function (a, b) {
      var an = a.cores === null, bn = b.cores === null;
      if (an !== bn) return an ? 1 : -1;
      if ((a.cores || 0) !== (b.cores || 0)) return (a.cores || 0) - (b.cores || 0);
      return b.per_core - a.per_core;
    });
    return rows;
  }

  function refusal(rows, rate, data, ms) {
    var said = 'no engine serves ' + Math.round(rate).toLocaleString('en-US') +
      ' requests/s of ' + data.page + ' within ' + label('p99', ms) + ' on at most ' +
      data.max_cores + (data.max_cores === 1 ? ' core' : ' cores');
    var sized = rows.filter(function (r) { return r.busiest; });
    if (sized.length) {
      var best = sized[0];
      sized.forEach(function (r) { if (r.total < best.total) best = r; });
      return said + ' (' + best.engine + ': ' + best.total + ' cores; ' + best.notes[0] + ')';
    }
    var top = null;
    rows.forEach(function (r) { if (!top || r.per_core > top.per_core) top = r; });
    if (!top || !top.per_core) return said;
    return said + ' (' + top.engine + ' would need ' + Math.ceil(rate / top.per_core) + ')';
  }

  function cell(text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function show() {
    var data = JSON.parse(document.getElementById('advise-data').textContent);
    var rate = parseFloat(document.getElementById('advise-rate').value);
    var ms = parseFloat(document.getElementById('advise-budget').value);
    var out = document.getElementById('advise-out');
    var said = document.getElementById('advise-said');
    out.textContent = '';
    if (!(rate > 0) || !(ms > 0) || !isFinite(rate) || !isFinite(ms)) {
      said.textContent = 'The rate and the budget must be numbers above zero.';
      return;
    }
    var rows = rank(data, rate, ms);
    var own = data.slo.percentile === 'p99' && Math.abs(data.slo.ms - ms) < 1e-9;
    if (!own && rows.length && !rows.some(function (r) { return r.per_core; })) {
      said.textContent = 'capacity within ' + label('p99', ms) + ' was not measured: no ' +
        'rate the run tried kept it (it searched at ' + label(data.slo.percentile, data.slo.ms) +
        ')';
      return;
    }
    said.textContent = rows.some(function (r) { return r.cores; }) ? '' :
      refusal(rows, rate, data, ms);
    rows.forEach(function (r) {
      var tr = document.createElement('tr');
      tr.appendChild(cell(r.engine));
      tr.appendChild(cell(r.app === null ? '–' : String(r.app), 'n'));
      tr.appendChild(cell(r.database));
      tr.appendChild(cell(r.cores === null ? '–' : String(r.cores), 'n'));
      tr.appendChild(cell(r.busiest ? r.busiest[0] + ' ' + pct(r.busiest[1]) + ' %' : '–'));
      tr.appendChild(cell(r.monthly === null ? '–' : r.monthly.toFixed(2), 'n'));
      tr.appendChild(cell(r.memory_kib === null ? '–' :
        Math.round(r.memory_kib / 1024).toLocaleString('en-US') + ' MiB', 'n'));
      tr.appendChild(cell(r.notes.join('; ')));
      out.appendChild(tr);
    });
  }

  window.adviseRank = rank;
  document.addEventListener('DOMContentLoaded', function () {
    ['advise-rate', 'advise-budget'].forEach(function (id) {
      document.getElementById(id).addEventListener('input', show);
    });
    show();
  });
})();
