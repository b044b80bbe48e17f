"""Whether a limit run's call did its work: every result right, and the
database changed as the calls say (the ballots exist, the votes and the
views moved by as much)."""
from data_interface import Stats
from . import VISIT_BATCH

VIEWS, VOTES, BALLOTS = (Stats._fields.index(f)
                         for f in ('views', 'votes', 'ballots'))


def moved(record, field):
    return record['after'][field] - record['before'][field]


def within(value, expected, slack, what):
    """None if value is expected (give or take slack), else why not."""
    if expected - slack <= value <= expected + slack:
        return None
    return '%s moved by %d, not %d%s' % (
        what, value, expected, ' ± %d' % slack if slack else '')


def failure(record):
    """Why the record's call did not do its work, or None. The record has
    done, bad, failed; before and after (site_stats); evidence; slack:
    calls that may have run beyond those counted (pgbench clients)."""
    call, done = record['call'], record['done']
    slack = record.get('slack', 0)
    evidence = record.get('evidence') or {}
    if not done and record.get('answered') == 0 and not (
            record.get('bad') or record.get('failed')):
        return None     # nothing came back within the run: flag() says so
    if not done:
        return 'no call did its work (%d wrong results, %d failed)' % (
            record.get('bad', 0), record.get('failed', 0))
    if record.get('bad'):
        return '%d wrong results' % record['bad']
    if 'answered' in record and record['answered'] > done:
        return '%d answers but %d calls did their work' % (
            record['answered'], done)
    if evidence.get('winner_votes_moved') is False:
        return "the last vote's winner has no more votes than before"
    if 'unavailable' in evidence:
        return 'the database could not show the work: %s' % (
            evidence['unavailable'])
    if call == 'vote':
        # pgbench: the first vote of each client finds no pair.
        return within(moved(record, VOTES), done, slack, 'the vote total')
    if call == 'visits':
        return within(moved(record, VIEWS), done * VISIT_BATCH,
                      slack * VISIT_BATCH, 'the views')
    if call == 'pair':
        return pair_failure(record, evidence, done, slack)
    if 'reads' in evidence and evidence['reads'] < done:
        return 'the database counts %d reads for %d calls' % (
            evidence['reads'], done)
    return None


def flag(record):
    """What makes a record's rate doubtful though its calls did their work
    (calls the database failed or timed out, no answer in time), or None."""
    if record.get('failed'):
        return '%d calls failed (database unavailable or timed out)' % (
            record['failed'])
    if record.get('answered') == 0:
        return 'no answer came back within the run'
    return None


def pair_failure(record, evidence, done, slack):
    if 'last_pair_vote' in evidence and evidence['last_pair_vote'] != 'ok':
        return 'the last ballots issued do not count: %s' % (
            evidence['last_pair_vote'])
    if 'session_ballots' in evidence:
        return within(evidence['session_ballots'], 2 * done, 2 * slack,
                      "the session's ballots")
    if 'max_ballots' in evidence:    # at the cap the oldest make room
        before = record['before'][BALLOTS]
        expected = min(before + 2 * done, evidence['max_ballots'])
        return within(record['after'][BALLOTS], expected, 0, 'the ballots')
    return None
