"""Keras 2's random layers: which draw from state a checkpoint can hold, and which cannot.

A Keras 2 layer that draws random numbers (Dropout, GaussianNoise, the random preprocessing
layers) holds a `RandomGenerator` of one of three kinds. By default it is `legacy_stateful`: it
calls TensorFlow's stateful random ops, whose position lives inside the op's kernel, where no
checkpoint can reach it. A resumed run then draws the masks of its first steps again, and its
weights differ from an uninterrupted run's, however exact the rest. With
`tf.keras.backend.experimental.enable_tf_random_generator()` at the script's top (before its
layers are made) the layers use a `tf.random.Generator` instead, whose state is a variable:
runtime/model_state.py saves and restores it, and the resume is exact.
"""

from __future__ import annotations


def legacy_random_layers(model) -> list[str]:
    """The names of the model's layers that draw from legacy stateful random ops (not checkpointable)."""
    layers = model._flatten_layers(include_self=False) if hasattr(model, "_flatten_layers") else []
    return [layer.name for layer in layers
            if getattr(getattr(layer, "_random_generator", None), "_rng_type", None) == "legacy_stateful"]
