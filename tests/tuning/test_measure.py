"""Latency measurement: calls compared with each other are timed in turns."""

import time

import torch

from aitune.torch.tuning.measure import MeasureConfig, measure_interleaved

CONFIG = MeasureConfig(warmup=1, min_repeats=3, max_repeats=3, max_seconds=5)


def test_calls_measured_together_take_turns_after_their_warmups():
    order = []

    measure_interleaved([lambda: order.append("eager"), lambda: order.append("candidate")], CONFIG, torch.device("cpu"))

    assert order == ["eager", "candidate"] + ["eager", "candidate"] * 3


def test_each_call_gets_its_own_latency():
    def slow():
        time.sleep(0.004)

    fast, slower = measure_interleaved([lambda: None, slow], CONFIG, torch.device("cpu"))

    assert (fast.repeats, slower.repeats) == (3, 3)
    assert slower.median_us > 3000 > fast.median_us
