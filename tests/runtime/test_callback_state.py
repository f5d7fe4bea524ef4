"""Callback state: the protocol, Keras's built-ins, picklable attributes, and their log files."""

from __future__ import annotations

import threading

import keras

from spotfit.runtime import callback_logs, callback_state


class _WithProtocol(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = 0

    def get_state(self):
        return {"seen": self.seen * 10}

    def set_state(self, state):
        self.seen = state["seen"] // 10


class _Plain(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.count = 0
        self.lock = threading.Lock()


def test_protocol_builtins_and_picklable_attributes_come_back():
    protocol, plain, lr = _WithProtocol(), _Plain(), keras.callbacks.ReduceLROnPlateau()
    protocol.seen, plain.count, lr.wait, lr.cooldown_counter, lr.best = 3, 7, 2, 1, 0.25
    blob, left_out = callback_state.capture([protocol, plain, lr])
    assert left_out == {"_Plain": ["lock"]}  # named in a warning event by the runtime
    again = [_WithProtocol(), _Plain(), keras.callbacks.ReduceLROnPlateau()]
    assert callback_state.restore(again, blob) == []
    restored = (again[0].seen, again[1].count, again[2].wait, again[2].cooldown_counter, again[2].best)
    assert restored == (3, 7, 2, 1, 0.25)


def test_a_changed_callback_list_is_reported_not_misapplied():
    blob, _ = callback_state.capture([keras.callbacks.EarlyStopping()])
    assert callback_state.restore([_Plain()], blob) == ["_Plain"]


def test_csv_log_keeps_only_the_epochs_before_the_resume(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("epoch,loss\n0,1.0\n1,0.9\n2,0.8\n")
    logger = keras.callbacks.CSVLogger(str(log))
    callback_logs.prepare_csv_logger(logger, resume_epoch=2)
    assert logger.append and log.read_text() == "epoch,loss\n0,1.0\n1,0.9\n"


def test_backup_and_restore_is_said_redundant_and_does_not_restore(tmp_path):
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    events = []
    callback_logs.prepare([keras.callbacks.History(), backup], None, lambda kind, message, **data: events.append(kind))
    assert events == ["backup_and_restore_redundant"]
    backup.on_train_begin()  # would load its backup (and fail: no model is set); turned off


def test_what_every_callback_has_from_its_base_class_is_not_saved_on_either_keras():
    import keras
    import tf_keras

    from spotfit.runtime import callback_state

    for base in (keras.callbacks.Callback, tf_keras.callbacks.Callback):
        assert set(vars(base())) <= callback_state._BASE_ATTRIBUTES, base
