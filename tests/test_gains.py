"""Predicted against realised gain (`aitune.gains`), from hand-built documents (no torch)."""

import pytest
from diff_docs import profile, with_method

from aitune.compare import compare_profiles
from aitune.gains import region_gains

SUGGESTED = {
    "targets": [
        {
            "path": "vae",
            "region_id": "untuned_module:vae.decode",
            "predicted_speedup": 1.2,
            "predicted_region_speedup": 2.0,
        }
    ]
}


def tuned_pair():
    """A flat entry method before (as AITune's files and ``max_depth=1`` captures have it), its wrapper after."""
    before = with_method(
        profile([{"untuned_module:unet": 100.0, "untuned_module:vae.decode": 40.0}] * 3),
        "untuned_module:vae.decode",
        "decode",
    )
    after = profile([{"untuned_module:unet": 100.0, "aot_module:vae": 10.0}] * 3)
    return before, after


def test_a_flat_method_region_is_measured_against_the_wrapper_that_replaced_it():
    before, after = tuned_pair()

    (gain,) = region_gains(SUGGESTED, compare_profiles(before, after), {"vae": ("onnxruntime", None)})

    assert gain.realised_region_speedup == pytest.approx(4.0)
    assert gain.realised_speedup == pytest.approx(150 / 120)
