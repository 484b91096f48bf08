"""What every recipe shares, one concern a module.

- `flags`: the shared command-line flags and their validators.
- `model_flags`: the architecture flags, `--synthesizer` (the package's
  variants) and `--synthesizer_options`.
- `runtime`: the backend check, the set-up every recipe starts with
  (`setup`) and the entry point `run_main`.
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
- `watchdog`: the processes that watch a recipe: one bounds its wait for
  its cluster or processes, one reports a stopped process of a
  multi-process run.
- `precision`: the dtype policy and the float32 matmul precision.
- `environment`: versions and devices, for `results.json`.
- `data_files`: `DataError` and data-file checks.
- `vocabulary`: WordPiece vocabularies (learned, read, saved).
- `storage`: reading and writing files through `tf.io.gfile` (local
  paths, `gs://`).
- `run_directory`: `RunDirectory` (configuration, versioned checkpoints,
  history, results).
- `training`: schedule, moving average, the recipes' AdamW, resumable
  epoch streams.
- `timing`: the steps timer and the time budget (callbacks that read no
  tensor).
- `callbacks`: the callbacks `Model.fit` gets (`assemble_callbacks`): the
  clocks, the checkpoint callback (restores, writes chief-only) and
  TensorBoard.
- `experiment`: the fit-evaluate-export skeleton of every recipe's `run()`
  (`train_and_evaluate`).

Importing these modules needs no TensorFlow and does not select a Keras
backend: the TensorFlow-specific helpers import it when called.
"""
