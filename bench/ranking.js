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

  // demand.curve: per rate served, the medians of the points' demand
  function curveOf(engine) {
    var by = new Map();
    engine.points.forEach(function (p) {
      if (!p.ok || !p.d || !p.o) return;
      if (!by.has(p.o)) by.set(p.o, []);
      by.get(p.o).push(p.d);
    });
    return Array.from(by.keys()).sort(function (a, b) { return a - b; }).map(function (o) {
      var c = {rate: o, points: by.get(o).length};
      FIELDS.forEach(function (f) { c[f] = median(by.get(o).map(function (x) { return x[f]; })); });
      return c;
    });
  }

  // sizing.at
  function at(curve, rate, field) {
    var pts = curve.filter(function (p) { return known(p[field]) && p.rate; });
    if (!pts.length) return [null, null];
    var last = pts[pts.length - 1];
    if (rate <= pts[0].rate) return [pts[0][field], rate === pts[0].rate ? 'measured' : 'below'];
    if (rate >= last.rate) return [last[field], rate === last.rate ? 'measured' : 'beyond'];
    for (var i = 1; i < pts.length; i++) {
      var a = pts[i - 1], b = pts[i];
      if (rate <= b.rate) {
        var f = (Math.log(rate) - Math.log(a.rate)) / (Math.log(b.rate) - Math.log(a.rate));
        return [a[field] + (b[field] - a[field]) * f, 'measured'];
      }
    }
  }

  // sizing.own_rate
  function ownRate(curve, field, t) {
    var pts = curve.filter(function (p) { return p[field] && p.rate; });
    if (!pts.length) return [null, null];
    var goal = t * 1e6;
    function work(r) { return r * at(curve, r, field)[0]; }
    if (work(pts[0].rate) >= goal) return [goal / pts[0][field], 'below'];
    for (var i = 1; i < pts.length; i++) {
      if (work(pts[i].rate) >= goal) {
        var lo = Math.log(pts[i - 1].rate), hi = Math.log(pts[i].rate);
        for (var k = 0; k < 60; k++) {
          var mid = (lo + hi) / 2;
          if (work(Math.exp(mid)) < goal) lo = mid; else hi = mid;
        }
        return [Math.exp(hi), 'measured'];
      }
    }
    return [goal / pts[pts.length - 1][field], 'beyond'];
  }

  // sizing.figures
  function figures(d, rate, t) {
    var out = Object.assign({}, d), curve = d.curve || [];
    out.read_at = null;
    if (curve.length < 2) return rankings(out, rate);
    var points = [];
    var w = d.workers || 1;
    var app = ownRate(curve, 'server_us', t * w)[0];
    if (app) {
      var r = Math.min(app / w, rate), s = at(curve, r * w, 'server_us');
      out.server_us = s[0];
      points.push(['server_us', s[0], r, s[1]]);
    }
    ['serial_us', 'spread_us', 'replicas_us', 'shards_us'].forEach(function (f) {
      var x = at(curve, rate, f);
      if (known(x[0]) && known(d[f])) { out[f] = x[0]; points.push([f, x[0], rate, x[1]]); }
    });
    out.read_at = points;
    return rankings(out, rate);
  }

  // sizing.rankings
  function rankings(d, rate) {
    if (!d.rankings) return d;
    var x = at(d.rankings, rate, 'serial_us');
    var out = Object.assign({}, d, {serial_us: x[0]});
    out.read_at = (d.read_at || []).filter(function (p) { return p[0] !== 'serial_us'; })
      .concat([['rankings', x[0], rate, x[1]]]);
    return out;
  }

  function coresFor(rate, us, t) { return us ? Math.ceil(rate * us / 1e6 / t - 1e-9) : 0; }

  function pct(v) { return Math.round(v * 100); }

  // budget.label
  function label(percentile, ms) {
    return percentile + ' ≤ ' + (ms >= 1 ? ms + ' ms' : (ms * 1000) + ' µs');
  }

  function plural(n, what) { return n + ' ' + what + (n === 1 ? '' : 's'); }

  // sizing.per_s
  function perS(rate) { return Math.floor(rate + 0.5).toLocaleString('en-US'); }

  // sizing.storage: [note, share of the disk]
  function storage(rate, d, disk, headroom) {
    var written = d.written_bytes;
    if (!written) return [null, 0];
    var need = rate * written;
    var said = written.toFixed(0) + ' bytes written to storage per request: ' +
      (need / 1e6).toFixed(1) + ' MB/s at this rate';
    if (!disk) {
      return [said + "; the disk's write rate not measured in this run (the wait for each " +
              'flush is not CPU, not in the model)', 0];
    }
    var share = need / disk;
    if (share > headroom) {
      return ['storage: ' + said + ', ' + pct(share) + " % of the disk's " +
              (disk / 1e6).toFixed(0) + ' MB/s (more than ' + pct(headroom) +
              ' %): spread the writes over disks', share];
    }
    return [said + ', ' + pct(share) + " % of the disk's " + (disk / 1e6).toFixed(0) +
            ' MB/s (the wait for each flush is not CPU, not in the model)', share];
  }

  // sizing.stored
  function stored(site, rate, d, data) {
    var found = storage(rate, d, data.disk, data.headroom);
    if (!found[0]) return site;
    if (found[1] > data.headroom && site.cores) {
      return Object.assign({}, site, {cores: null, monthly: null,
        notes: [found[0]].concat(site.notes), limit: 'disk writes ' + pct(found[1]) + ' %'});
    }
    return Object.assign({}, site, {notes: site.notes.concat([found[0]])});
  }

  // sizing.thread_us
  function threadUs(d, t, serialUs) {
    var top = (d.curve || []).length > 1 && !d.rankings ? ownRate(d.curve, 'serial_us', t)[0]
      : null;
    return top ? t * 1e6 / top : serialUs;
  }

  // sizing.limit
  function limit(t, serialUs, thread, totalUs, maxCores) {
    var byCores = maxCores * t * 1e6 / totalUs;
    if (serialUs && t * 1e6 / serialUs <= byCores) {
      return thread + ' at ' + perS(t * 1e6 / serialUs) + '/s';
    }
    return maxCores + ' cores at ' + perS(byCores) + '/s';
  }

  // sizing.cluster
  function cluster(rate, d, data, memory, t) {
    var notes = [];
    var rankingsUs = d.serial_us || 0;
    var reads = d.replicas_us;
    var readers = Math.max(1, coresFor(rate, reads, t));
    var shards = Math.max(1, coresFor(rate, d.shards_us, t));
    var totalUs = d.server_us + rankingsUs + (reads || 0) + d.shards_us;
    var total = Math.max(1, coresFor(rate, totalUs, t)), cores = total, first;
    var rankings = rate * rankingsUs / 1e6;
    if (rankings > t) {
      notes.push("the rankings' shard: its main thread would be " + pct(rankings) +
                 ' % busy (the site keeps each core within ' + pct(t) +
                 " %): a cluster spreads the visitors' data and the reads, not the " +
                 "votes' applies");
      cores = null;
      first = "rankings' shard " + pct(rankings) + ' %';
    } else if (total > data.max_cores) {
      notes.push('needs ' + total + ' cores, more than --max-cores ' + data.max_cores);
      cores = null;
      first = 'needs ' + total + ' cores';
    } else {
      first = limit(t, d.rankings ? t * 1e6 / ownRate(d.rankings, 'serial_us', t)[0]
                    : threadUs(d, t, rankingsUs), "rankings' shard", totalUs, data.max_cores);
    }
    notes.push(known(reads) ? "a bucket shard's replica (copying its primary's writes): " +
               'not counted, not measured apart'
               : 'a replica per primary: not counted, not measured');
    var mem = null;
    if (memory && memory.server_kib) {
      mem = total * memory.server_kib +
        (memory.database_kib || 0) * (1 + readers + 2 * shards) / (2 * (d.shards || 1));
    }
    return {app: total, total: total, cores: cores, limit: first, notes: notes,
            sized: true, basis: 'modelled',
            database: 'rankings + ' + readers + ' replica' + (readers > 1 ? 's' : '') + ', ' +
              shards + ' bucket shard' + (shards > 1 ? 's' : '') + ' + a replica each',
            memory_kib: mem, monthly: cores ? cores * data.hours * data.price : null,
            read_at: d.read_at};
  }

  // advise.points_said, shortened: where each tier's figure was read
  function readAt(points, d) {
    var n = function (v) { return Math.round(v).toLocaleString('en-US'); };
    if (!points || !points.length) {
      return 'CPU µs per request at that one point (the run holds no curve of two rates ' +
        'or more)';
    }
    var said = [], held = false;
    points.forEach(function (p) {
      said.push(p[0].replace('_us', '') + ' ' + n(p[1]) + ' at ' + n(p[2]) + '/s');
      held = held || p[3] === 'beyond';
    });
    var curve = d.curve || [];
    return 'CPU µs per request' + (curve.length > 1 ? " on the run's curve (" +
      n(curve[0].rate) + '–' + n(curve[curve.length - 1].rate) + '/s)' : '') + ': ' +
      said.join(', ') + " (the server at an app core's rate, the database at the site's)" +
      (held ? '; past the highest rate measured, held there: modelled' : '');
  }

  // sizing.layout
  function layout(kind, replicas) {
    if (!kind) return '–';
    return replicas ? 'primary + ' + replicas + ' replica' + (replicas > 1 ? 's' : '')
      : '1 primary';
  }

  // sizing.size
  function size(rate, d, data, replica, memory) {
    var kind = d.database, notes = [];
    var t = data.headroom * d.share;
    d = figures(d, rate, t);
    if (replica) replica = figures(replica, rate, t);
    if (kind === 'rediscluster' && known(d.shards_us)) {
      return stored(cluster(rate, d, data, memory, t), rate, d, data);
    }
    var serialUs = d.serial_us || 0;
    var spreadUs = d.spread_us || 0;
    var serialKind = (kind in THREAD) && known(d.serial_us);
    var replicasUs = 0, blocked = null;
    if (serialKind && rate * serialUs / 1e6 > t) {
      var onReplicas = replica && rate * (replica.serial_us || 0) / 1e6;
      if (replica && onReplicas <= t && replica.replicas_us) {
        serialUs = replica.serial_us || 0;
        spreadUs = replica.spread_us || 0;
        replicasUs = replica.replicas_us;
      } else {
        blocked = 'one ' + (NAMES[kind] || kind) + ' primary: its ' + THREAD[kind] +
          ' would be ' + (d.split === 'estimated' ? 'up to ' : '') +
          pct(rate * serialUs / 1e6) + ' % busy (the site keeps each core within ' +
          pct(t) + ' %): shard the writes' +
          (replica ? '' : '; read replicas not measured in this run');
      }
    }
    var totalUs = d.server_us + serialUs + spreadUs + replicasUs;
    var total = Math.max(1, coresFor(rate, totalUs, t));
    var replicas = replicasUs ? Math.max(1, coresFor(rate, replicasUs, t)) : 0;
    var thread = serialKind ? THREAD[kind] : null;
    var cores = total, first;
    if (blocked) {
      notes.push(blocked); cores = null;
      first = thread + ' ' + pct(rate * serialUs / 1e6) + ' %';
    } else if (total > data.max_cores) {
      notes.push('needs ' + total + ' cores, more than --max-cores ' + data.max_cores);
      cores = null;
      first = 'needs ' + total + ' cores';
    } else {
      first = limit(t, serialKind && !replicasUs ? threadUs(d, t, serialUs)
                    : serialKind ? serialUs : 0, thread, totalUs, data.max_cores);
    }
    if (kind && !serialKind && total > 1) {
      notes.push((NAMES[kind] || kind) + ' over ' + total + ' cores, measured on one: its ' +
                 'WAL writer and the row locks of votes on the same stickers are serial ' +
                 'points this does not measure');
    }
    var mem = null;
    if (memory && memory.server_kib) {
      mem = total * memory.server_kib + (memory.database_kib || 0) * (1 + replicas);
    }
    return stored({app: total, database: layout(kind, replicas), total: total, cores: cores,
                   limit: first, notes: notes, memory_kib: mem, sized: true,
                   basis: 'modelled', monthly: cores ? cores * data.hours * data.price : null,
                   read_at: replicasUs && replica.read_at && d.read_at
                     ? d.read_at.slice(0, 1).concat(replica.read_at.slice(1)) : d.read_at},
                  rate, d, data);
  }

  function noise(e, cap, own) {
    // advise.row's notes on the capacity searches (the run's own budget only)
    var notes = [];
    if (!own || !e.cap || !e.cap.length) return notes;
    var lo = Math.min.apply(null, e.cap), hi = Math.max.apply(null, e.cap);
    if (e.noisy) {
      notes.push('runs ' + Math.round(lo).toLocaleString('en-US') + '–' +
                 Math.round(hi).toLocaleString('en-US') + '/s (spread > ' + e.noisy + '%)');
    }
    return notes;
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
      var mem;
      if (cap >= rate && data.workers <= data.max_cores) {
        mem = e.memory ? data.workers * e.memory.server_kib + (e.memory.database_kib || 0)
          : null;
        rows.push({engine: e.name, per_core: perCore, cores: data.workers,
                   basis: 'measured', total: data.workers, sized: false,
                   limit: 'measured to ' + perS(cap) + '/s',
                   database: e.database === 'rediscluster' ? "the run's cluster"
                     : layout(e.database, 0),
                   memory_kib: mem, monthly: data.workers * data.hours * data.price,
                   notes: noise(e, cap, own).concat(['measured: the run served ' +
                     Math.round(cap).toLocaleString('en-US') + '/s within the budget on ' +
                     plural(data.workers, 'core') + ', server and database sharing ' +
                     (data.workers === 1 ? 'it' : 'them')])});
        return;
      }
      var d = atCapacity(e, ms);
      if (d && d.share && d.server_us && perCore) {
        d.database = e.database;
        d.share = Math.min(1, d.share / data.workers);
        d.curve = curveOf(e);
        d.workers = data.workers;
        if (e.database === 'rediscluster' && data.rankings) d.rankings = data.rankings;
        var replica = null;
        e.replicas.forEach(function (name) {
          if (replica) return;
          var r = byName[name] && atCapacity(byName[name], ms);
          if (r && r.replicas_us) { replica = r; r.curve = curveOf(byName[name]); }
        });
        if (e.tagged) replica = d;
        var site = size(rate, d, data, replica, e.memory);
        site.engine = e.name; site.per_core = perCore;
        site.notes = site.notes.concat(noise(e, cap, own), [readAt(site.read_at, d)]);
        rows.push(site);
        return;
      }
      var cores = perCore ? Math.ceil(rate / perCore / data.headroom - 1e-9) : null;
      var notes = noise(e, cap, own), first = '–';
      if (!perCore) notes.push('kept the budget at no rate tried');
      else if (cores > data.max_cores) {
        notes.push('needs ' + cores + ' cores, more than --max-cores ' + data.max_cores);
        first = 'needs ' + cores + ' cores';
        cores = null;
      } else {
        first = data.max_cores + ' cores at ' +
          perS(data.max_cores * perCore * data.headroom) + '/s';
      }
      mem = e.memory && cores ? cores * e.memory.server_kib + (e.memory.database_kib || 0) : null;
      rows.push({engine: e.name, per_core: perCore, app: cores, database: '–',
                 cores: cores, total: cores, basis: 'modelled', sized: false, limit: first,
                 notes: notes, memory_kib: mem,
                 monthly: cores ? cores * data.hours * data.price : null});
    });
    rows.sort(function (a, b) {
      var an = a.cores === null, bn = b.cores === null;
      if (an !== bn) return an ? 1 : -1;
      var am = a.basis !== 'measured', bm = b.basis !== 'measured';
      if (am !== bm) return am ? 1 : -1;
      if ((a.cores || 0) !== (b.cores || 0)) return (a.cores || 0) - (b.cores || 0);
      return b.per_core - a.per_core;
    });
    return rows;
  }

  function refusal(rows, rate, data, ms) {
    var said = 'no engine serves ' + Math.round(rate).toLocaleString('en-US') +
      ' requests/s of ' + data.page + ' within ' + label('p99', ms) + ' on at most ' +
      data.max_cores + (data.max_cores === 1 ? ' core' : ' cores');
    var sized = rows.filter(function (r) { return r.sized; });
    if (sized.length) {
      var best = sized[0];
      sized.forEach(function (r) { if (r.total < best.total) best = r; });
      return said + ' (' + best.engine + ': ' + best.total + ' cores; ' + best.notes[0] + ')';
    }
    var top = null;
    rows.forEach(function (r) { if (r.total && (!top || r.total < top.total)) top = r; });
    if (!top) return said;
    return said + ' (' + top.engine + ' would need ' + top.total + ')';
  }

  function cell(text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function row(r) {
    var tr = document.createElement('tr');
    tr.appendChild(cell(r.engine));
    tr.appendChild(cell(r.cores === null ? '–' : String(r.cores), 'n'));
    tr.appendChild(cell(r.basis));
    tr.appendChild(cell(r.database));
    tr.appendChild(cell(r.limit));
    tr.appendChild(cell(r.monthly === null ? '–' : r.monthly.toFixed(2), 'n'));
    tr.appendChild(cell(r.memory_kib === null ? '–' :
      Math.round(r.memory_kib / 1024).toLocaleString('en-US') + ' MiB', 'n'));
    tr.appendChild(cell(r.notes.join('; ')));
    return tr;
  }

  function show() {
    var data = JSON.parse(document.getElementById('advise-data').textContent);
    var rate = parseFloat(document.getElementById('advise-rate').value);
    var ms = parseFloat(document.getElementById('advise-budget').value);
    var db = document.getElementById('advise-db').value;
    var out = document.getElementById('advise-out');
    var refused = document.getElementById('advise-refused-out');
    var said = document.getElementById('advise-said');
    var folded = document.getElementById('advise-refused');
    out.textContent = '';
    refused.textContent = '';
    folded.hidden = true;
    remember(rate, ms, db);
    if (!(rate > 0) || !(ms > 0) || !isFinite(rate) || !isFinite(ms)) {
      said.textContent = 'The rate and the budget must be finite numbers above zero.';
      return;
    }
    var kinds = {};
    data.engines.forEach(function (e) { kinds[e.name] = e.database; });
    var rows = rank(data, rate, ms).filter(function (r) { return !db || kinds[r.engine] === db; });
    var own = data.slo.percentile === 'p99' && Math.abs(data.slo.ms - ms) < 1e-9;
    if (!own && rows.length && !rows.some(function (r) { return r.per_core; })) {
      said.textContent = 'capacity within ' + label('p99', ms) + ' was not measured: no ' +
        'rate the run tried kept it (it searched at ' + label(data.slo.percentile, data.slo.ms) +
        ')';
      return;
    }
    said.textContent = rows.some(function (r) { return r.cores; }) ? '' :
      refusal(rows, rate, data, ms);
    var cannot = 0;
    rows.forEach(function (r) {
      if (r.cores === null) { refused.appendChild(row(r)); cannot += 1; }
      else out.appendChild(row(r));
    });
    if (cannot) {
      folded.hidden = false;
      document.getElementById('advise-refused-said').textContent =
        plural(cannot, 'stack') + ' cannot serve it: why';
    }
  }

  // the form's values in the address (?rate=5000&p99=10&db=postgres), so a
  // ranking can be sent as a link; a page opened from a file may refuse it
  function remember(rate, ms, db) {
    try {
      var q = new URLSearchParams();
      q.set('rate', String(rate)); q.set('p99', String(ms));
      if (db) q.set('db', db);
      history.replaceState(null, '', '?' + q.toString() + location.hash);
    } catch (e) { /* not kept: the ranking still shows */ }
  }

  function recall() {
    var q = new URLSearchParams(location.search);
    [['rate', 'advise-rate'], ['p99', 'advise-budget'], ['db', 'advise-db']]
      .forEach(function (p) {
        var v = q.get(p[0]);
        var input = document.getElementById(p[1]);
        if (v === null) return;
        if (input.tagName === 'SELECT' &&
            !Array.prototype.some.call(input.options, function (o) { return o.value === v; })) {
          return;
        }
        input.value = v;
      });
  }

  window.adviseRank = rank;
  document.addEventListener('DOMContentLoaded', function () {
    recall();
    ['advise-rate', 'advise-budget', 'advise-db'].forEach(function (id) {
      document.getElementById(id).addEventListener('input', show);
    });
    show();
  });
})();
