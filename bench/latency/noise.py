"""How much a figure's runs differ, and when that is called noise."""
import statistics

# A cell whose runs differ by more than this share of their median is
# flagged as noisy in results.md.
NOISE = 0.25


def spread(values):
    """(max - min) / median of the known values; None with fewer than two."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else None


def triple(values):
    """{'median', 'min', 'max', 'runs'} of the known values."""
    values = [v for v in values if v is not None]
    if not values:
        return {'median': None, 'min': None, 'max': None, 'runs': 0}
    return {'median': statistics.median(values), 'min': min(values),
            'max': max(values), 'runs': len(values)}


def noisy(values):
    """More than NOISE apart; a median of 0 with another value is too."""
    s = spread(values)
    known = [v for v in values if v is not None]
    return s > NOISE if s is not None else len(set(known)) > 1
