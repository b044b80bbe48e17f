//! Per request kind: how many, their statuses and errors, and a histogram
//! of their latency (microseconds, from when each was due); written as JSON.
use std::collections::BTreeMap;

use hdrhistogram::Histogram;

pub const PERCENTILES: [(&str, f64); 4] = [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9)];

pub struct Kind {
    pub count: u64,
    pub status: BTreeMap<u16, u64>,
    pub errors: BTreeMap<&'static str, u64>,
    hist: Histogram<u64>,
}

impl Kind {
    pub fn new() -> Kind {
        Kind {
            count: 0,
            status: BTreeMap::new(),
            errors: BTreeMap::new(),
            hist: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("histogram bounds"),
        }
    }

    pub fn answered(&mut self, status: u16, micros: u64) {
        self.count += 1;
        *self.status.entry(status).or_insert(0) += 1;
        self.hist.saturating_record(micros.max(1));
    }

    pub fn failed(&mut self, error: &'static str) {
        self.count += 1;
        *self.errors.entry(error).or_insert(0) += 1;
    }

    pub fn json(&self) -> String {
        let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
        let mut latency: Vec<String> = Vec::new();
        for (name, q) in PERCENTILES.iter() {
            let value = if self.hist.is_empty() { "null".to_string() } else { ms(self.hist.value_at_percentile(*q)) };
            latency.push(format!("\"{}\": {}", name, value));
        }
        let max = if self.hist.is_empty() { "null".to_string() } else { ms(self.hist.max()) };
        latency.push(format!("\"max\": {}", max));
        let status: Vec<String> = self.status.iter().map(|(k, v)| format!("\"{}\": {}", k, v)).collect();
        let errors: Vec<String> = self.errors.iter().map(|(k, v)| format!("\"{}\": {}", k, v)).collect();
        format!(
            "{{\"count\": {}, \"status\": {{{}}}, \"errors\": {{{}}}, \"latency_ms\": {{{}}}}}",
            self.count,
            status.join(", "),
            errors.join(", "),
            latency.join(", ")
        )
    }
}

pub struct Stats {
    pub kinds: BTreeMap<&'static str, Kind>,
    pub overall: Kind,
    pub votes_ok: u64,
}

impl Stats {
    pub fn new() -> Stats {
        Stats { kinds: BTreeMap::new(), overall: Kind::new(), votes_ok: 0 }
    }

    pub fn answered(&mut self, kind: &'static str, status: u16, micros: u64) {
        self.kinds.entry(kind).or_insert_with(Kind::new).answered(status, micros);
        self.overall.answered(status, micros);
        if kind == "vote" && status == 200 {
            self.votes_ok += 1;
        }
    }

    pub fn failed(&mut self, kind: &'static str, error: &'static str) {
        self.kinds.entry(kind).or_insert_with(Kind::new).failed(error);
        self.overall.failed(error);
    }
}

/// (user, system) CPU seconds of this process so far.
pub fn cpu() -> (f64, f64) {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}
