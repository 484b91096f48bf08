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
- `files`: every file operation, on local paths (Python's `os`, `open`)
  and on `gs://` and other `tf.io.gfile` file systems.
- `data_files`: `DataError` and data-file checks.
- `vocabulary`: WordPiece vocabularies (learned, read, saved).
- `atomic`: atomic writes, JSON files and the recovery of what a killed
  write left behind.
- `run_directory`: `RunDirectory` (configuration, backup, history,
  results).
- `training`: schedule, moving average, resumable epoch streams, steps
  timer, time budget, and the callbacks `Model.fit` gets
  (`assemble_callbacks`).
- `callbacks`: Keras' BackupAndRestore (atomic, chief-only), CSVLogger
  history and TensorBoard, as every recipe trains with them.
- `experiment`: the fit-evaluate-export skeleton of every recipe's `run()`
  (`train_and_evaluate`).

Importing these modules needs no TensorFlow and does not select a Keras
backend: the TensorFlow-specific helpers import it when called.
"""
