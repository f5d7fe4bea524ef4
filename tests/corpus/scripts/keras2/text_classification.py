# Written for spotfit's tests in the style of the TensorFlow 2.x tutorial "Basic text
# classification" (tensorflow.org/tutorials/keras/text_classification, tf.keras 2). Not a copy:
# the reviews are generated here from two small vocabularies (no IMDB download), and the script's
# first line turns on tf.random.Generator for its Dropout layers: Keras 2's default (legacy
# stateful random ops) keeps its position where no checkpoint reaches (docs/resume.md#keras-2).
"""TextVectorization adapted on a tf.data pipeline, Embedding + pooling, `.cache().prefetch()`."""
import numpy as np
import tensorflow as tf

tf.keras.backend.experimental.enable_tf_random_generator()

rng = np.random.default_rng(3)
good = "great wonderful moving superb fine brilliant warm funny clever".split()
bad = "dull awful boring weak poor tedious flat silly clumsy".split()
neutral = "the film story actor plot scene music was and it a".split()


def review(label):
    words = rng.choice(neutral, 8).tolist() + rng.choice(good if label else bad, 3).tolist()
    rng.shuffle(words)
    return " ".join(words)


labels = rng.integers(0, 2, 1200)
texts = [review(y) for y in labels]
raw_train_ds = tf.data.Dataset.from_tensor_slices((texts[:1000], labels[:1000])).batch(32)
raw_val_ds = tf.data.Dataset.from_tensor_slices((texts[1000:], labels[1000:])).batch(32)

max_features = 100
sequence_length = 16
vectorize_layer = tf.keras.layers.TextVectorization(max_tokens=max_features, output_mode="int",
                                                    output_sequence_length=sequence_length)
vectorize_layer.adapt(raw_train_ds.map(lambda x, y: x))


def vectorize_text(text, label):
    return vectorize_layer(tf.expand_dims(text, -1)), label


AUTOTUNE = tf.data.AUTOTUNE
train_ds = raw_train_ds.map(vectorize_text).cache().prefetch(buffer_size=AUTOTUNE)
val_ds = raw_val_ds.map(vectorize_text).cache().prefetch(buffer_size=AUTOTUNE)

model = tf.keras.Sequential([
    tf.keras.layers.Embedding(max_features + 1, 16),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.GlobalAveragePooling1D(),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(1)])
model.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True), optimizer="adam",
              metrics=tf.metrics.BinaryAccuracy(threshold=0.0))
history = model.fit(train_ds, validation_data=val_ds, epochs=3, verbose=2)
loss, accuracy = model.evaluate(val_ds, verbose=0)
print(f"final: loss={loss!r} acc={accuracy!r} history={history.history['loss']!r}")
