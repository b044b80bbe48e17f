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
    return rankings(out, rate, app ? r : null);
  }

  // sizing.rankings: read at one server process's rate
  function rankings(d, rate, own) {
    if (!d.rankings) return d;
    if (!known(own)) own = d.rate ? Math.min(rate, d.rate / (d.workers || 1)) : rate;
    var x = at(d.rankings, own, 'serial_us');
    var out = Object.assign({}, d, {serial_us: x[0]});
    out.read_at = (d.read_at || []).filter(function (p) { return p[0] !== 'serial_us'; })
      .concat([['rankings', x[0], own, x[1]]]);
    return out;
  }

  function coresFor(rate, us, t) { return us ? Math.ceil(rate * us / 1e6 / t - 1e-9) : 0; }

  function pct(v) { return Math.round(v * 100); }

  // Python's %g (6 significant figures, no trailing zeros)
  function g(v) { return String(Number(v.toPrecision(6))); }

  // Python's %.0f: half to even
  function fixed0(v) {
    var r = Math.round(v);
    if (Math.abs(v % 1) === 0.5 && r % 2) r -= 1;
    return r;
  }

  function comma0(v) { return fixed0(v).toLocaleString('en-US'); }

  // budget.label
  function label(percentile, ms) {
    return percentile + ' ≤ ' + (ms >= 1 ? g(ms) + ' ms' : g(ms * 1000) + ' µs');
  }

  function plural(n, what) { return n + ' ' + what + (n === 1 ? '' : 's'); }

  // sizing.per_s
  function perS(rate) { return Math.floor(rate + 0.5).toLocaleString('en-US'); }

  // sizing.storage: [note, share of the disk]
  function storage(rate, d, disk, headroom) {
    var written = d.written_bytes;
    if (!written) return [null, 0];
    var need = rate * written;
    var said = fixed0(written) + ' bytes written to storage per request: ' +
      (need / 1e6).toFixed(1) + ' MB/s at this rate';
    if (!disk) {
      return [said + "; the disk's write rate not measured in this run (the wait for each " +
              'flush is not CPU, not in the model)', 0];
    }
    var share = need / disk;
    if (share > headroom) {
      return ['storage: ' + said + ', ' + pct(share) + " % of the disk's " +
              fixed0(disk / 1e6) + ' MB/s (more than ' + pct(headroom) +
              ' %): spread the writes over disks', share];
    }
    return [said + ', ' + pct(share) + " % of the disk's " + fixed0(disk / 1e6) +
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
      first = limit(t, d.rankings ? rankingsUs : threadUs(d, t, rankingsUs),
                    "rankings' shard", totalUs, data.max_cores);
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
  // advise.points_said: where each tier's CPU per request comes from
  function pointsSaid(points, d) {
    points = points || [];
    var curve = points.filter(function (p) { return p[0] !== 'rankings'; });
    var ranked = points.filter(function (p) { return p[0] === 'rankings'; });
    var read = Object.assign({}, d), said;
    curve.forEach(function (p) { read[p[0]] = p[1]; });
    if (ranked.length) read.serial_us = ranked[0][1];
    if (!curve.length) {
      said = 'CPU µs per request at that one point (the run holds no curve of two rates ' +
        'or more): server ' + fixed0(read.server_us) + ', database ' + databaseUs(read);
    } else {
      var lo = comma0(d.curve[0].rate), hi = comma0(d.curve[d.curve.length - 1].rate);
      var rates = {}, hows = curve.map(function (p) { return p[3]; });
      points.forEach(function (p) { rates[p[0]] = comma0(p[2]); });
      said = "CPU µs per request on the run's curve (" + lo + '–' + hi + '/s): server ' +
        fixed0(read.server_us) + ' at ' + rates.server_us + "/s (an app core's rate: its " +
        "own capacity, at most the site's)";
      if (points.length > 1) {
        said += ', database ' + databaseUs(read) + ' at ' + rates[points[points.length - 1][0]] +
          "/s (the site's rate)";
      }
      if (hows.indexOf('beyond') >= 0) {
        said += '; past ' + hi + '/s, the highest rate measured, each held at its figure ' +
          'there: modelled';
      }
      if (hows.indexOf('below') >= 0) {
        said += '; below ' + lo + '/s, the lowest rate measured, held at its figure there';
      }
    }
    if (ranked.length) {
      var r = ranked[0];
      said += "; the rankings' shard's " + fixed0(r[1]) + ' µs per mix request at ' +
        comma0(r[2]) + "/s, one server's rate, from bench.py cluster-batches (each " +
        "server's votes in batches of " +
        fixed0(at(d.rankings, r[2], 'batch')[0]) + ' there' +
        (r[3] === 'beyond' ? ': past the highest rate cast, held, modelled' : '') + ')';
    }
    return said;
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

  // noise.noisy: more than NOISE apart (a median of 0 with another value too)
  function noisy(values, noise) {
    var m = median(values);
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
    if (values.length < 2 || !m) return lo !== hi;
    return (hi - lo) / m > noise / 100;
  }

  // advise.capacity_notes: the run's own (e.said), else as advise.reread
  // reads the searches again under this budget
  function noise(e, ms, own, data) {
    if (own) return e.said;
    var rates = [], open = false, host = 0;
    runs(e).forEach(function (points) {
      var b = bracket(points.map(function (p) { return [p.o, keeps(p, ms)]; }));
      rates.push(b[0] || 0);
      if (b[1] === null) open = true;
      else if (points.filter(function (p) { return p.o === b[1]; })
               .every(function (p) { return p.h; })) host += 1;
    });
    var notes = [];
    if (!rates.length) return notes;
    if (open) notes.push('capacity at least this: kept the budget at every rate tried');
    if (noisy(rates, data.noise)) {
      notes.push('runs ' + comma0(Math.min.apply(null, rates)) + '–' +
                 comma0(Math.max.apply(null, rates)) + '/s (spread > ' + data.noise + '%)');
    }
    if (host) notes.push(host + ' of ' + rates.length +
                         ' searches stopped where only a slow host missed');
    return notes;
  }

  // advise.database_us
  function databaseUs(d) {
    if (!known(d.serial_us)) return 'not read';
    if (known(d.shards_us)) {
      return fixed0(d.serial_us) + " on the rankings' shard" +
        (known(d.replicas_us) ? ' + ' + fixed0(d.replicas_us) + ' on its replicas' : '') +
        ' + ' + fixed0(d.shards_us) + ' over ' + Math.trunc(d.shards || 0) + ' bucket shards';
    }
    if (d.database in THREAD) {
      return fixed0(d.serial_us) + ' on its ' + THREAD[d.database] + ' + ' +
        fixed0(d.spread_us || 0);
    }
    return String(fixed0((d.serial_us || 0) + (d.spread_us || 0)));
  }

  // advise.sized's notes after the site's own
  function modelled(site, d, data, replica) {
    var h = data.headroom, notes = [];
    if (d.database === 'rediscluster' && data.page === 'mix' && !data.rankings) {
      notes.push("the rankings' shard from the run's own points: the run carries no " +
                 "bench.py cluster-batches figures (its votes' batches at higher rates)");
    }
    notes.push('modelled: ' + (site.cores ? '' : 'would be ') + plural(site.total, 'core') +
      ', each at ' + pct(h * d.share) + ' % busy (' + pct(h) + ' % of the ' +
      fixed0(d.share * 100) + ' % its core was at ' + comma0(d.rate) +
      '/s, keeping the budget); ' + pointsSaid(site.read_at, d));
    if (d.split === 'estimated' && d.database in THREAD) {
      notes.push("split estimated: the run recorded the database's CPU whole, all " +
                 'counted on its ' + THREAD[d.database] + ' (an upper bound)');
    }
    if (d.database in THREAD && !site.replicas && !replica && site.cores !== null) {
      notes.push('read replicas not measured in this run');
    }
    return notes;
  }

  function rank(data, rate, ms, pct_) {
    var own = data.slo.percentile === (pct_ || 'p99') && Math.abs(data.slo.ms - ms) < 1e-9;
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
                   notes: noise(e, ms, own, data).concat(['measured: the run served ' +
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
        site.notes = site.notes.concat(noise(e, ms, own, data), modelled(site, d, data, replica));
        rows.push(site);
        return;
      }
      var cores = perCore ? Math.ceil(rate / perCore / data.headroom - 1e-9) : null;
      var notes = noise(e, ms, own, data), first = '–', total = cores;
      if (!perCore) notes.push('kept the budget at no rate tried');
      else if (cores > data.max_cores) {
        notes.push('needs ' + cores + ' cores, more than --max-cores ' + data.max_cores);
        first = 'needs ' + cores + ' cores';
        cores = null;
      } else {
        first = data.max_cores + ' cores at ' +
          perS(data.max_cores * perCore * data.headroom) + '/s';
        notes.push('modelled: linear from ' + plural(data.workers, 'core') +
                   ', each core at ' + pct(data.headroom) + ' % of its capacity');
      }
      if (perCore) {
        notes.push('no CPU per request in the run: cores from capacity alone, the ' +
                   'database not sized');
      }
      mem = e.memory && cores ? cores * e.memory.server_kib + (e.memory.database_kib || 0) : null;
      rows.push({engine: e.name, per_core: perCore, app: cores, database: '–',
                 cores: cores, total: total, basis: 'modelled', sized: false, limit: first,
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

  function refusal(rows, rate, data, ms, pct_) {
    var said = 'no engine serves ' + comma0(rate) +
      ' requests/s of ' + data.page + ' within ' + label(pct_, ms) + ' on at most ' +
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

  // The page: the form (kept in the address), a compact table as advise's
  // text gives it, the refused rows folded, then a numbered note per row.
  var FORM = [['rate', 'advise-rate'], ['p99', 'advise-budget'], ['pct', 'advise-pct'],
              ['db', 'advise-db'], ['fw', 'advise-fw'], ['headroom', 'advise-headroom'],
              ['price', 'advise-price']];

  function $(id) { return document.getElementById(id); }

  function cell(text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  // advise.cells, the compact table's columns: stack, cores, $/month,
  // first limit, basis [n]
  function row(r, n) {
    var tr = document.createElement('tr');
    tr.className = 'db-' + (r.kind || 'none');
    var stack = cell('', 'stack');
    r.engine.split('-').forEach(function (part, i) {   // a narrow screen breaks at '-'
      if (i) stack.appendChild(document.createElement('wbr'));
      stack.appendChild(document.createTextNode((i ? '-' : '') + part));
    });
    tr.appendChild(stack);
    tr.appendChild(cell(r.cores === null ? '–' : String(r.cores), 'n'));
    tr.appendChild(cell(r.monthly === null ? '–' : r.monthly.toFixed(2), 'n'));
    tr.appendChild(cell(r.limit));
    var basis = cell(r.basis + ' ');
    var a = document.createElement('a');
    a.href = '#note-' + n;
    a.textContent = '[' + n + ']';
    basis.appendChild(a);
    tr.appendChild(basis);
    return tr;
  }

  // advise.text's numbered note
  function note(r, n, rate, data) {
    var li = document.createElement('li');
    li.id = 'note-' + n;
    var million = r.cores ? r.cores * (data.price / (rate * 3600) * 1e6) : null;
    var head = document.createElement('span');
    head.textContent = '[' + n + '] ' + r.engine + ': capacity/core ' + comma0(r.per_core) +
      '; database ' + r.database + '; $/M requests at ' + perS(rate) + '/s ' +
      (million === null ? '–' : million.toFixed(4)) + '; memory ' +
      (r.memory_kib === null ? 'not measured' : comma0(r.memory_kib / 1024) + ' MiB');
    var said = document.createElement('span');
    said.className = 'said';
    said.textContent = 'Notes: ' + r.notes.join('; ');
    li.appendChild(head);
    li.appendChild(document.createTextNode(' '));
    li.appendChild(said);
    return li;
  }

  // floor.warnings: the machine's floor against this budget
  function machine(floor, pct_, ms) {
    if (!floor) return [];
    var out = floor.errors.slice(), slo = label(pct_, ms);
    var missed = floor.runs.filter(function (r) {
      return known(r[pct_]) ? r[pct_] > ms : Boolean(r.miss);
    });
    if (missed.length) {
      out.push(floor.missed.replace('%d', missed.length).replace('%d', floor.runs.length)
               .replace('%s', slo));
    }
    if (floor.probes.some(function (p) {
      return p.slow_pct > floor.slow_share && p.longest_ms >= ms / 2;
    })) out.push(floor.unsteady.replace('%s', slo));
    return out.map(function (line) { return 'Machine: ' + line.replace(/`/g, ''); });
  }

  function values() {
    var v = {};
    FORM.forEach(function (f) { v[f[0]] = $(f[1]).value; });
    return v;
  }

  // the same as `bench.py advise RESULTS ...` with these options
  function command(v, data) {
    var args = ['python bench.py advise RESULTS', '--rate ' + v.rate,
                '--slo ' + v.pct + '=' + v.p99 + 'ms'];
    if (data.page !== 'mix') args.push('--workload ' + data.page);
    if (v.db) args.push('--database ' + v.db);
    if (v.fw) args.push('--framework ' + v.fw);
    if (Number(v.headroom) !== data.headroom) args.push('--headroom ' + v.headroom);
    if (Math.abs(Number(v.price) - data.price * data.hours) > 1e-9) {
      args.push('--price ' + v.price);
    }
    return args.join(' ');
  }

  function number(text, what, most) {
    var n = Number(text);
    if (text === '') return what + ' must be a finite number above zero';
    if (isNaN(n)) return what + ': ' + JSON.stringify(text) + ' is not a number';
    if (!isFinite(n)) return what + ' must be a finite number (got ' + text + ')';
    if (!(n > 0)) return what + ' must be above zero (got ' + text + ')';
    if (most !== undefined && n > most) {
      return what + ' must be at most ' + most.toLocaleString('en-US') + ' (got ' + text +
        ')' + (what === 'the rate' ? ': past that the answer is arithmetic, not a site' : '');
    }
    return null;
  }

  function show() {
    var data = JSON.parse($('advise-data').textContent);
    var v = values();
    var out = $('advise-out'), refused = $('advise-refused-out'), notes = $('advise-notes');
    var said = $('advise-said'), folded = $('advise-refused'), warn = $('advise-warn');
    [out, refused, notes, warn].forEach(function (el) { el.textContent = ''; });
    folded.hidden = true;
    remember(v, data);
    $('advise-command').textContent = command(v, data);
    var wrong = number(v.rate, 'the rate', data.max_rate) ||
      number(v.p99, 'the budget') || number(v.headroom, 'the headroom', 1) ||
      number(v.price, 'the price');
    if (!wrong && Number(v.rate) < 1) {
      wrong = 'the rate must be at least 1 request/s (got ' + v.rate + ')';
    }
    if (wrong) { said.textContent = wrong + '.'; return; }
    var rate = Number(v.rate), ms = Number(v.p99), pct_ = v.pct;
    var chosen = Object.assign({}, data, {
      headroom: Number(v.headroom), price: Number(v.price) / data.hours,
      engines: data.engines.map(function (e) {
        return Object.assign({}, e, {points: e.points.map(function (p) {
          return Object.assign({}, p, {p: p.l[pct_]});
        })});
      })});
    if (Math.abs(chosen.price * data.hours - data.price * data.hours) < 1e-9) {
      chosen.price = data.price;
    }
    var kinds = {}, fws = {};
    data.engines.forEach(function (e) { kinds[e.name] = e.database; fws[e.name] = e.framework; });
    var rows = rank(chosen, rate, ms, pct_).filter(function (r) {
      return (!v.db || kinds[r.engine] === v.db) && (!v.fw || fws[r.engine] === v.fw);
    });
    var own = data.slo.percentile === pct_ && Math.abs(data.slo.ms - ms) < 1e-9;
    if (!own && rows.length && !rows.some(function (r) { return r.per_core; })) {
      said.textContent = 'capacity within ' + label(pct_, ms) + ' was not measured: no ' +
        'rate the run tried kept it (it searched at ' + label(data.slo.percentile, data.slo.ms) +
        ')';
      return;
    }
    said.textContent = rows.some(function (r) { return r.cores; }) ? '' :
      refusal(rows, rate, chosen, ms, pct_);
    var warnings = machine(data.floor, pct_, ms);
    if (!own) {
      warnings.push('Capacity read again from the fixed-rate points of a run searched at ' +
        label(data.slo.percentile, data.slo.ms) + ', not searched at ' + label(pct_, ms) +
        ' itself: as coarse as the rates tried.');
    }
    var shaky = rows.filter(function (r) { return r.cores !== null && r.notes.some(function (t) {
      return /^runs .*spread|searches stopped where only a slow host/.test(t);
    }); });
    if (shaky.length) {
      warnings.push('⚠ ' + plural(shaky.length, 'stack') + ' rest on searches that disagree ' +
        'or were stopped by the host (' + shaky.map(function (r) { return r.engine; })
        .join(', ') + '): only differences past their range mean something.');
    }
    warnings.forEach(function (w) {
      var li = document.createElement('li');
      li.textContent = w;
      warn.appendChild(li);
    });
    var cannot = 0;
    rows.forEach(function (r, i) {
      r.kind = kinds[r.engine];
      if (r.cores === null) { refused.appendChild(row(r, i + 1)); cannot += 1; }
      else out.appendChild(row(r, i + 1));
      notes.appendChild(note(r, i + 1, rate, chosen));
    });
    if (cannot) {
      folded.hidden = false;
      $('advise-refused-said').textContent = plural(cannot, 'stack') + ' cannot serve it: why';
    }
  }

  // the form's values in the address (?rate=5000&p99=10&db=postgres&...),
  // so a ranking can be sent as a link; a page opened from a file may refuse it
  function remember(v, data) {
    try {
      var q = new URLSearchParams();
      FORM.forEach(function (f) {
        var defaults = {pct: data.slo.percentile, headroom: String(data.headroom),
                        price: (data.price * data.hours).toFixed(2)};
        if (v[f[0]] !== '' && v[f[0]] !== defaults[f[0]]) q.set(f[0], v[f[0]]);
      });
      history.replaceState(null, '', '?' + q.toString() + location.hash);
    } catch (e) { /* not kept: the ranking still shows */ }
  }

  function recall() {
    var q = new URLSearchParams(location.search);
    FORM.forEach(function (f) {
      var v = q.get(f[0]), input = $(f[1]);
      if (v === null) return;
      if (input.tagName === 'SELECT' &&
          !Array.prototype.some.call(input.options, function (o) { return o.value === v; })) {
        return;
      }
      input.value = v;
    });
  }

  window.adviseRank = rank;
  window.adviseMachine = machine;
  document.addEventListener('DOMContentLoaded', function () {
    recall();
    FORM.forEach(function (f) { $(f[1]).addEventListener('input', show); });
    show();
  });
})();
