"""The user's training script as the controller side reads it, without running it or importing TensorFlow:
whether it compiles and has something to checkpoint (`scriptcheck.py`), and which Keras it runs on
(`keras2.py`: `training.keras: 3 | 2 | auto`)."""
