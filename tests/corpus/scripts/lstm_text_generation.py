# Copyright 2015 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, examples/generative/lstm_character_level_text_generation.py:
# "Character-level text generation with LSTM", by fchollet. Changed: the text (the docstrings of
# four modules of Python's standard library, lower-cased and cut to 6,000 characters, instead of
# the Nietzsche download), the sizes (3 epochs instead of 40, steps of 9 characters instead of 3
# between sequences, two diversities of 8 generated characters instead of four of 400: each
# character is a `predict` call, about 65 ms of CPU here), and a last `final:` line with the loss
# of each `fit` and all generated text for the tests. The model, the optimizer, the sampling
# function and the loop of one-epoch `fit` calls, each followed by generation with Python's and
# NumPy's random numbers, are the example's.
"""Three `fit` calls in a loop, with random text generation between them."""

import argparse
import difflib
import heapq
import json
import random
import sys

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

# ## Prepare the data

text = "\n".join(module.__doc__ for module in (argparse, difflib, heapq, json)).lower()[:6000]
print("corpus length:", len(text))

chars = sorted(list(set(text)))
print("total chars:", len(chars))
char_indices = dict((c, i) for i, c in enumerate(chars))
indices_char = dict((i, c) for i, c in enumerate(chars))

# cut the text in semi-redundant sequences of maxlen characters
maxlen = 40
step = 9
sentences = []
next_chars = []
for i in range(0, len(text) - maxlen, step):
    sentences.append(text[i : i + maxlen])
    next_chars.append(text[i + maxlen])
print("nb sequences:", len(sentences))

print("Vectorization...")
x = np.zeros((len(sentences), maxlen, len(chars)), dtype=bool)
y = np.zeros((len(sentences), len(chars)), dtype=bool)
for i, sentence in enumerate(sentences):
    for t, char in enumerate(sentence):
        x[i, t, char_indices[char]] = 1
    y[i, char_indices[next_chars[i]]] = 1


# ## Build the model: a single LSTM layer

model = keras.Sequential(
    [
        keras.Input(shape=(maxlen, len(chars))),
        layers.LSTM(128),
        layers.Dense(len(chars), activation="softmax"),
    ]
)
optimizer = keras.optimizers.RMSprop(learning_rate=0.01)
model.compile(loss="categorical_crossentropy", optimizer=optimizer)

# ## Prepare the text sampling function


def sample(preds, temperature=1.0):
    # helper function to sample an index from a probability array
    preds = np.asarray(preds).astype("float64")
    preds = np.log(preds) / temperature
    exp_preds = np.exp(preds)
    preds = exp_preds / np.sum(exp_preds)
    probas = np.random.multinomial(1, preds, 1)
    return np.argmax(probas)


# ## Train the model

epochs = 3
batch_size = 128
losses, texts = [], []

for epoch in range(epochs):
    history = model.fit(x, y, batch_size=batch_size, epochs=1)
    losses.append(history.history["loss"][-1])

    print("Generating text after epoch: %d" % epoch)

    start_index = random.randint(0, len(text) - maxlen - 1)
    for diversity in [0.5, 1.0]:
        print("----- diversity:", diversity)

        generated = ""
        sentence = text[start_index : start_index + maxlen]
        generated += sentence
        print('----- Generating with seed: "' + sentence + '"')
        sys.stdout.write(generated)

        for i in range(8):
            x_pred = np.zeros((1, maxlen, len(chars)))
            for t, char in enumerate(sentence):
                x_pred[0, t, char_indices[char]] = 1.0

            preds = model.predict(x_pred, verbose=0)[0]
            next_index = sample(preds, diversity)
            next_char = indices_char[next_index]

            sentence = sentence[1:] + next_char
            generated += next_char

            sys.stdout.write(next_char)
            sys.stdout.flush()
        print()
        texts.append(generated)

print("final:", repr([losses, texts]))
