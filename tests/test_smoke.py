"""The bundled example profiles end to end and its document validates."""

import pipeline_app

import aitune.torch as ait
from aitune.report import validate


def test_example_pipeline_profiles_into_a_valid_document():
    prof = ait.profile(pipeline_app.pipe, pipeline_app.input_data, pipeline_app.infer, warmup_runs=0, measured_runs=2)

    assert validate(prof.data) == []
    assert [r["region_id"] for r in prof.data["runs"][0]["regions"]] == [
        "untuned_module:text_encoder",
        "untuned_module:unet",
        "untuned_module:vae.decode",
    ]
