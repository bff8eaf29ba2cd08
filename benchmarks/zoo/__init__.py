"""The model zoo: small apps of model families nobody on this project wrote, built from tiny random-weight
configs (no downloads), each the way its users run it.

Every app module has ``build() -> (obj, input_data, inference_function)``, ready for
``aitune.torch.profile(obj, input_data, inference_function)`` and ``aitune.torch.optimize`` (an
``inference_function`` of None calls ``obj``), and ``DESCRIPTION``; an app whose calls differ in turn (a
service's rotating inputs) says after how many calls they repeat as ``CYCLE``. Builds are seeded: two builds
give the same weights, and the inference functions seed their own noise, so two calls give the same output.

    from zoo import APPS
    obj, input_data, infer = APPS["bert_classifier"].build()
"""

from __future__ import annotations

from types import ModuleType

from zoo import (
    bert_classifier,
    ddpm,
    detector,
    forgotten_eval,
    gpt2_generate,
    image_classifier,
    llama_generate,
    mixtral_moe,
    qa_varying,
    rnn_seq2seq,
    sequential_convnet,
    t5_generate,
    text_to_image,
    whisper_generate,
)

APPS: dict[str, ModuleType] = {
    "image_classifier": image_classifier,
    "bert_classifier": bert_classifier,
    "t5_generate": t5_generate,
    "whisper_generate": whisper_generate,
    "gpt2_generate": gpt2_generate,
    "text_to_image": text_to_image,
    "ddpm": ddpm,
    "rnn_seq2seq": rnn_seq2seq,
    "llama_generate": llama_generate,
    "mixtral_moe": mixtral_moe,
    "detector": detector,
    "qa_varying": qa_varying,
    "sequential_convnet": sequential_convnet,
    "forgotten_eval": forgotten_eval,
}
"""Every app by name, in the benchmark's order."""
