# Copyright 2022 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, examples/structured_data/structured_data_classification_with_feature_space.py:
# "Structured data classification with FeatureSpace", by fchollet. Changed: the data (303 seeded
# synthetic rows with the heart-disease CSV's 13 columns and value ranges, as a dict of NumPy
# columns instead of the CSV download read by pandas, and split 20/80 by a seeded permutation
# instead of `DataFrame.sample`), the sizes (5 epochs instead of 20), the first, string-named
# FeatureSpace and the printing of samples left out (the example replaces it at once), and a last
# `final:` line with the validation metrics and the inference model's prediction for the tests.
# The customized FeatureSpace, its `adapt`, the `tf.data` pipelines that apply it, the training
# and inference models, compile and fit are the example's.
"""Structured data: a `keras.utils.FeatureSpace` adapted, then applied in a shuffled `tf.data` pipeline."""

import numpy as np
import tensorflow as tf
from tensorflow import keras

# ## Preparing the data (synthetic, seeded: no download)

rng = np.random.default_rng(303)
n = 303
dataframe = {
    "age": rng.integers(29, 78, n).astype("int64"),
    "sex": rng.integers(0, 2, n).astype("int64"),
    "cp": rng.integers(0, 5, n).astype("int64"),
    "trestbps": rng.integers(94, 201, n).astype("int64"),
    "chol": rng.integers(126, 565, n).astype("int64"),
    "fbs": rng.integers(0, 2, n).astype("int64"),
    "restecg": rng.integers(0, 3, n).astype("int64"),
    "thalach": rng.integers(71, 203, n).astype("int64"),
    "exang": rng.integers(0, 2, n).astype("int64"),
    "oldpeak": rng.uniform(0, 6.2, n).round(1),
    "slope": rng.integers(1, 4, n).astype("int64"),
    "ca": rng.integers(0, 4, n).astype("int64"),
    "thal": rng.choice(["fixed", "normal", "reversible"], n),
}
risk = 0.03 * (dataframe["age"] - 50) + 0.8 * dataframe["exang"] + 0.5 * dataframe["ca"] - 0.02 * (
    dataframe["thalach"] - 150)
dataframe["target"] = (risk + rng.normal(0, 1, n) > 0.8).astype("int64")

val_index = np.sort(rng.permutation(n)[: int(0.2 * n)])
train_index = np.setdiff1d(np.arange(n), val_index)
val_dataframe = {k: v[val_index] for k, v in dataframe.items()}
train_dataframe = {k: v[train_index] for k, v in dataframe.items()}

print(
    "Using %d samples for training and %d for validation"
    % (len(train_index), len(val_index))
)


def dataframe_to_dataset(dataframe):
    dataframe = dict(dataframe)
    labels = dataframe.pop("target")
    ds = tf.data.Dataset.from_tensor_slices((dict(dataframe), labels))
    ds = ds.shuffle(buffer_size=len(labels))
    return ds


train_ds = dataframe_to_dataset(train_dataframe)
val_ds = dataframe_to_dataset(val_dataframe)

train_ds = train_ds.batch(32)
val_ds = val_ds.batch(32)

# ## Configuring a `FeatureSpace`

from keras.utils import FeatureSpace  # noqa: E402

feature_space = FeatureSpace(
    features={
        # Categorical features encoded as integers
        "sex": FeatureSpace.integer_categorical(num_oov_indices=0),
        "cp": FeatureSpace.integer_categorical(num_oov_indices=0),
        "fbs": FeatureSpace.integer_categorical(num_oov_indices=0),
        "restecg": FeatureSpace.integer_categorical(num_oov_indices=0),
        "exang": FeatureSpace.integer_categorical(num_oov_indices=0),
        "ca": FeatureSpace.integer_categorical(num_oov_indices=0),
        # Categorical feature encoded as string
        "thal": FeatureSpace.string_categorical(num_oov_indices=0),
        # Numerical features to discretize
        "age": FeatureSpace.float_discretized(num_bins=30),
        # Numerical features to normalize
        "trestbps": FeatureSpace.float_normalized(),
        "chol": FeatureSpace.float_normalized(),
        "thalach": FeatureSpace.float_normalized(),
        "oldpeak": FeatureSpace.float_normalized(),
        "slope": FeatureSpace.float_normalized(),
    },
    # Specify feature cross with a custom crossing dim.
    crosses=[
        FeatureSpace.cross(feature_names=("sex", "age"), crossing_dim=64),
        FeatureSpace.cross(
            feature_names=("thal", "ca"),
            crossing_dim=16,
        ),
    ],
    output_mode="concat",
)

# ## Adapt the `FeatureSpace` to the training data

train_ds_with_no_labels = train_ds.map(lambda x, _: x)
feature_space.adapt(train_ds_with_no_labels)

preprocessed_train_ds = train_ds.map(
    lambda x, y: (feature_space(x), y), num_parallel_calls=tf.data.AUTOTUNE
)
preprocessed_train_ds = preprocessed_train_ds.prefetch(tf.data.AUTOTUNE)

preprocessed_val_ds = val_ds.map(
    lambda x, y: (feature_space(x), y), num_parallel_calls=tf.data.AUTOTUNE
)
preprocessed_val_ds = preprocessed_val_ds.prefetch(tf.data.AUTOTUNE)

# ## Build a model

dict_inputs = feature_space.get_inputs()
encoded_features = feature_space.get_encoded_features()

x = keras.layers.Dense(32, activation="relu")(encoded_features)
x = keras.layers.Dropout(0.5)(x)
predictions = keras.layers.Dense(1, activation="sigmoid")(x)

training_model = keras.Model(inputs=encoded_features, outputs=predictions)
training_model.compile(
    optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"]
)

inference_model = keras.Model(inputs=dict_inputs, outputs=predictions)

# ## Train the model

history = training_model.fit(
    preprocessed_train_ds, epochs=5, validation_data=preprocessed_val_ds, verbose=2
)

# ## Inference on new data with the end-to-end model

sample = {
    "age": 60,
    "sex": 1,
    "cp": 1,
    "trestbps": 145,
    "chol": 233,
    "fbs": 1,
    "restecg": 2,
    "thalach": 150,
    "exang": 0,
    "oldpeak": 2.3,
    "slope": 3,
    "ca": 0,
    "thal": "fixed",
}

input_dict = {name: tf.convert_to_tensor([value]) for name, value in sample.items()}
predictions = inference_model.predict(input_dict)

print(
    f"This particular patient had a {100 * predictions[0][0]:.2f}% probability "
    "of having a heart disease, as evaluated by our model."
)
print("final:", repr([history.history, float(predictions[0][0])]))
