"""The soak's verdict: flat memory passes, steady growth after the warm-up
fails, growth during the warm-up does not count."""
import pytest

from bench.soak import MIB, growth, verdict


def samples(values, every=5):
    return [{'t': i * every, 'm': v * MIB} for i, v in enumerate(values)]


@pytest.mark.parametrize('values, flat', [
    ([10, 40, 60, 60, 61, 60, 60, 61, 60, 60], True),      # warm-up growth
    ([60, 60, 61, 62, 64, 66, 68, 70, 72, 74], False),     # a leak
    ([60, 60, 60, 60, 60, 60, 60, 60, 60, 61.5], True),    # noise
])
def test_growth_after_warmup_decides(values, flat):
    first, second = growth(samples(values), 'm', warmup=10)
    assert verdict(first, second, 0.05) is flat


def test_too_few_samples_cannot_be_judged():
    assert growth(samples([1, 2, 3]), 'm', warmup=10) is None
