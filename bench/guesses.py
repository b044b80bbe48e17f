"""Rough seconds each part of a run takes, only for the time left on the
progress bar; and which page and mode each kind of target is timed in."""
from . import wrk
from .latency import budget
from .latency.mixed import PAGE as MIX
from .nginx import NGINX_PAGES

START_GUESS, VERIFY_GUESS, RUN_GUESS, VOTE_GUESS = 6.0, 3.0, 0.3, 1.5
# Beyond its duration, a fixed-rate run: oha's start and the CPU reads; a
# mix's also the vote total settling after it (0.6-1.0 s measured on the
# 2-core VM; the total before is the last point's after, when it ran last).
POINT_GUESS, MIX_POINT_GUESS = 0.5, 1.2


def point_guess(plan, page):
    """Seconds of one fixed-rate run of a page."""
    return plan.point_duration + (MIX_POINT_GUESS if page == 'mix' else POINT_GUESS)


def combos(plan, kind):
    """(page, mode) a target of this kind is timed in, in order."""
    for page in plan.pages:
        if kind == 'nginx' and page not in NGINX_PAGES:
            continue
        if kind == 'hello' and page != 'ugly':
            continue
        for mode in plan.modes:
            if not (mode == 'pipelined' and page in wrk.PLAIN_ONLY):
                yield page, mode


def offers_rates(plan, page):
    """Does this page get fixed-rate runs after its closed-loop ones?"""
    return bool(plan.latency) and (plan.fixed_pages is None
                                   or page in plan.fixed_pages)


def searches(plan, page):
    """How many capacity searches a page offered fixed rates gets."""
    return plan.searches.get(page) or plan.runs


def series_guess(plan, page, kind='engine'):
    if page == 'mix':   # one closed loop of loadgen, then the fixed rates only
        runs, warmup = plan.duration + RUN_GUESS, 0
    else:
        runs, warmup = plan.runs * (plan.duration + RUN_GUESS), plan.warmup
    if page == 'vote':
        runs += plan.runs * VOTE_GUESS
    if kind != 'hello' and offers_rates(plan, page):
        runs += searches(plan, page) * search_guess(plan, page)
    return warmup + runs


# Rates a capacity's confirmation runs, on average, with its tries again.
CONFIRMED = 1.3


def search_guess(plan, page):
    """Seconds of one capacity search: the rate steps, the probes, tries
    again, the capacity confirmed."""
    steps = ((len(plan.rates or plan.fractions) + budget.PROBES)
             * (1 + budget.RETRIED))
    confirm = getattr(plan, 'confirm', 0)
    return steps * point_guess(plan, page) + (
        CONFIRMED * (confirm + point_guess(plan, page) - plan.point_duration)
        if confirm else 0.0)


def target_guess(plan, kind):
    guess = START_GUESS + VERIFY_GUESS + sum(
        series_guess(plan, page, kind) for page, _ in combos(plan, kind))
    if kind == 'engine' and plan.profile:
        # the mix has no closed-loop run to sample
        guess += len([p for p in plan.pages if p != MIX]) * (plan.duration + 1.5)
    if kind == 'engine' and 'ugly' in plan.pages:
        # its hello reference, started for the ugly runs
        guess += target_guess(plan, 'hello')
    return guess
