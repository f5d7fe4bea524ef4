"""The runtime: the code that runs inside an attempt, the only part of spotfit that imports TF.

It runs the user's Keras script unmodified and instruments `keras.Model.fit`: restore the
newest valid checkpoint, replay the input pipeline to the exact data position, checkpoint
periodically and on a preemption notice, report progress and events to the object store.

It talks to the controller only through the job's store prefix and its exit code, both
described by `spotfit.attempt`, which the controller imports too (the exit codes:
`spotfit.attempt.exit_codes`).
"""
