//! loadgen: visitors of the sticker site arrive at a fixed rate (an open
//! model: each arrival is scheduled on the clock, whether or not earlier
//! visitors are done). A visitor GETs / (its session cookie and a ballot),
//! then either votes with that ballot (probability --vote) or reads one
//! page: /good, /bad, /about or the pack of a sticker it was shown. Each
//! request is timed from when it was due (the first at the visitor's
//! arrival, the next when the previous answer came, no think time), so
//! waiting for a connection and any stall count. One thread; the JSON report
//! on stdout includes the generator's own CPU time.
mod flow;
mod pool;
mod stats;

use std::cell::RefCell;
use std::process::exit;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use tokio::time::{sleep_until, timeout, Instant};

use pool::{Answer, Pool};
use stats::Stats;

const USAGE: &str = "usage: loadgen --url http://HOST:PORT --rate VISITORS_PER_S --duration SECONDS \
[--connections 64] [--timeout 10] [--vote 0.7] [--seed 1]\n   or: loadgen --url ... --closed VISITORS --duration SECONDS (each visitor \
starts its next visit when its last one ends: the mix's saturation rate)";
/// What a visitor who does not vote reads, by weight (of 100).
const BROWSE: [(&str, u64); 4] = [("good", 40), ("pack", 30), ("bad", 20), ("about", 10)];

struct Options {
    host: String,
    rate: f64,
    duration: f64,
    connections: usize,
    timeout: f64,
    vote: f64,
    seed: u64,
    closed: usize,
}

fn fail(message: &str) -> ! {
    eprintln!("loadgen: {}\n{}", message, USAGE);
    exit(2);
}

fn number(name: &str, value: Option<String>) -> f64 {
    let text = value.unwrap_or_else(|| fail(&format!("{} needs a value", name)));
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => v,
        _ => fail(&format!("{} {:?} is not a number", name, text)),
    }
}

fn options() -> Options {
    let mut o = Options { host: String::new(), rate: -1.0, duration: -1.0, connections: 64, timeout: 10.0, vote: 0.7, seed: 1, closed: 0 };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--url" => {
                let url = args.next().unwrap_or_else(|| fail("--url needs a value"));
                let host = url.strip_prefix("http://").unwrap_or_else(|| fail(&format!("--url {:?}: only http://HOST:PORT", url)));
                let host = host.trim_end_matches('/');
                if host.is_empty() || host.contains('/') {
                    fail(&format!("--url {:?}: only http://HOST:PORT, no path", url));
                }
                o.host = if host.contains(':') { host.to_string() } else { format!("{}:80", host) };
            }
            "--rate" => o.rate = number("--rate", args.next()),
            "--duration" => o.duration = number("--duration", args.next()),
            "--connections" => o.connections = number("--connections", args.next()) as usize,
            "--timeout" => o.timeout = number("--timeout", args.next()),
            "--vote" => o.vote = number("--vote", args.next()),
            "--seed" => o.seed = number("--seed", args.next()) as u64,
            "--closed" => o.closed = number("--closed", args.next()).max(0.0) as usize,
            "-h" | "--help" => {
                println!("{}", USAGE);
                exit(0);
            }
            other => fail(&format!("unknown argument {:?}", other)),
        }
    }
    if o.host.is_empty() {
        fail("--url is required");
    }
    if o.closed == 0 && !(o.rate > 0.0) {
        fail("--rate must be above 0 visitors per second");
    }
    if !(o.duration > 0.0) {
        fail("--duration must be above 0 seconds");
    }
    if o.connections < 1 || !(o.timeout > 0.0) || !(0.0..=1.0).contains(&o.vote) {
        fail("--connections must be at least 1, --timeout above 0, --vote within 0..1");
    }
    o
}

/// xorshift64*: a visitor's dice, reproducible from --seed.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % sides
    }
}

struct Site {
    pool: Pool,
    host: String,
    timeout: Duration,
    stats: RefCell<Stats>,
}

impl Site {
    /// Send a request due at `due`; its answer, recorded under `kind`
    /// with its latency from `due`; None (an error recorded) if it failed.
    async fn call(&self, kind: &'static str, due: Instant, method: &str, path: &str,
                  cookie: Option<&str>, form: Option<String>) -> Option<Answer> {
        let mut request = Request::builder().method(method).uri(path).header("host", self.host.as_str());
        if let Some(sid) = cookie {
            request = request.header("cookie", format!("sid={}", sid));
        }
        let body = match form {
            Some(form) => {
                request = request.header("content-type", "application/x-www-form-urlencoded");
                Bytes::from(form)
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(body)).expect("a valid request");
        match timeout(self.timeout, self.pool.send(request)).await {
            Ok(Ok(answer)) => {
                let micros = Instant::now().saturating_duration_since(due).as_micros() as u64;
                self.stats.borrow_mut().answered(kind, answer.status, micros);
                Some(answer)
            }
            Ok(Err(error)) => {
                self.stats.borrow_mut().failed(kind, error);
                None
            }
            Err(_) => {
                self.stats.borrow_mut().failed(kind, "timeout");
                None
            }
        }
    }

    async fn visit(&self, arrival: Instant, dice: &mut Dice, vote: f64) {
        let index = match self.call("index", arrival, "GET", "/", None, None).await {
            Some(a) if a.status == 200 => a,
            _ => return,
        };
        let html = String::from_utf8_lossy(&index.body);
        let pick = dice.roll(2) as usize;
        let due = Instant::now();   // the answer came: the next request is due
        if (dice.roll(1_000_000) as f64) < vote * 1_000_000.0 {
            let ballot = match flow::ballot(&html, pick) {
                Some(b) => b,
                None => return self.stats.borrow_mut().failed("index", "no ballot"),
            };
            let form = format!("win={}&lose={}", ballot.win, ballot.lose);
            self.call("vote", due, "POST", "/", index.cookie.as_deref(), Some(form)).await;
            return;
        }
        let mut roll = dice.roll(100);
        let mut kind = BROWSE[0].0;
        for (name, weight) in BROWSE.iter() {
            if roll < *weight {
                kind = name;
                break;
            }
            roll -= weight;
        }
        let path = match kind {
            "pack" => match flow::pack(&html, pick) {
                Some(p) => p,
                None => return self.stats.borrow_mut().failed("pack", "no pack link"),
            },
            other => format!("/{}", other),
        };
        self.call(kind, due, "GET", &path, index.cookie.as_deref(), None).await;
    }
}

fn main() {
    let o = options();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, run(o));
}

async fn run(o: Options) {
    if let Err(e) = tokio::net::TcpStream::connect(&o.host).await {
        eprintln!("loadgen: cannot connect to {}: {}", o.host, e);
        exit(2);
    }
    let site = Rc::new(Site {
        pool: Pool::new(&o.host, o.connections),
        host: o.host.clone(),
        timeout: Duration::from_secs_f64(o.timeout),
        stats: RefCell::new(Stats::new()),
    });
    let start = Instant::now();
    let mut seeds = Dice(o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut lag = Duration::ZERO;
    let mut running = tokio::task::JoinSet::new();
    let mut visitors = 0u64;
    if o.closed > 0 {
        let end = start + Duration::from_secs_f64(o.duration);
        for _ in 0..o.closed {
            let (site, mut dice, vote) = (site.clone(), Dice(seeds.roll(u64::MAX) | 1), o.vote);
            running.spawn_local(async move {
                let mut visits = 0u64;
                while Instant::now() < end {
                    site.visit(Instant::now(), &mut dice, vote).await;
                    visits += 1;
                }
                visits
            });
        }
        while let Some(done) = running.join_next().await {
            visitors += done.unwrap_or(0);
        }
    } else {
        visitors = ((o.rate * o.duration).round() as u64).max(1);
        let gap = Duration::from_secs_f64(1.0 / o.rate);
        for i in 0..visitors {
            let arrival = start + gap.mul_f64(i as f64);
            sleep_until(arrival).await;
            lag = lag.max(Instant::now().saturating_duration_since(arrival));
            let (site, mut dice, vote) = (site.clone(), Dice(seeds.roll(u64::MAX) | 1), o.vote);
            running.spawn_local(async move {
                site.visit(arrival, &mut dice, vote).await;
                0
            });
            while running.try_join_next().is_some() {}
        }
        while running.join_next().await.is_some() {}
    }
    let seconds = start.elapsed().as_secs_f64();
    let (user, system) = stats::cpu();
    let s = site.stats.borrow();
    let kinds: Vec<String> = s.kinds.iter().map(|(k, v)| format!("\"{}\": {}", k, v.json())).collect();
    println!(
        "{{\"rate\": {}, \"closed\": {}, \"duration_s\": {}, \"visitors\": {}, \"vote\": {}, \"connections\": {}, \
\"seconds\": {:.3}, \"requests\": {}, \"votes_ok\": {}, \"connections_opened\": {}, \
\"schedule_lag_ms\": {:.3}, \"cpu_s\": {{\"user\": {:.3}, \"system\": {:.3}}}, \
\"overall\": {}, \"kinds\": {{{}}}}}",
        o.rate.max(0.0), o.closed, o.duration, visitors, o.vote, o.connections, seconds, s.overall.count, s.votes_ok,
        site.pool.opened.get(), lag.as_secs_f64() * 1000.0, user, system, s.overall.json(), kinds.join(", ")
    );
}
