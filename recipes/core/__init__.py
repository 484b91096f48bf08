"""What every recipe shares, one concern a module.

- `flags`: the shared command-line flags and their validators.
- `runtime`: the TensorFlow backend requirement, the set-up every recipe
  starts with (`setup`) and the entry point `run_main`.
- `strategies`: the tf.distribute strategies (`--strategy`), created first.
- `devices`: logical devices (`KERAS_SYNTH_LOGICAL_DEVICES`) and the log
  line naming the devices.
- `cluster`: multi-worker clusters from `TF_CONFIG` (bounded in time), the
  chief process and what it prepares for the other workers
  (`chief_first`).
- `processes`: several JAX processes (`keras.distribution.initialize`
  from `--job_addresses`, `--num_processes`, `--process_id`), each
  process's share of a batch, its local model for evaluation, the message
  for a process that stopped.
- `watchdog`: the process that bounds a recipe's wait for its cluster or
  processes.
- `precision`: the dtype policy and the float32 matmul precision.
- `environment`: versions and devices, for `results.json`.
- `data_files`: `DataError` and data-file checks.
- `vocabulary`: WordPiece vocabularies (learned, read, saved).
- `storage`: reading and writing files through `tf.io.gfile` (local
  paths, `gs://`).
- `run_directory`: `RunDirectory` (configuration, versioned checkpoints,
  history, results).
- `training`: schedule, moving average, resumable epoch streams, steps
  timer, time budget, and the callbacks `Model.fit` gets
  (`assemble_callbacks`).
- `callbacks`: the checkpoint callback (restores, writes chief-only) and
  TensorBoard, as every recipe trains with them.
- `experiment`: the fit-evaluate-export skeleton of every recipe's `run()`
  (`train_and_evaluate`).

Importing these modules needs no TensorFlow and does not select a Keras
backend: the TensorFlow-specific helpers import it when called.
"""
