"""What every recipe shares, one concern a module.

- `flags`: the shared command-line flags and their validators.
- `model_flags`: the architecture flags, `--synthesizer` (the package's
  variants) and `--synthesizer_options`.
- `runtime`: the backend check, the check of the flags against it
  (`check_placement`), the set-up every recipe starts with (`setup`), the
  entry point `run_main` and the message for a peer that stopped.
- `compute`: the one place that picks where a run computes: the
  tf.distribute strategies (`--strategy`, created first), and on JAX and
  PyTorch Keras' placement or `keras.distribution` (`--distribution`).
- `devices`: logical devices (`KERAS_SYNTH_LOGICAL_DEVICES`), the log
  line naming the devices, the dtype policy and the float32 matmul
  precision, and the versions and devices for `results.json`.
- `cluster`: starting a run of several workers (`TF_CONFIG`) or JAX
  processes (`--job_addresses`, `--num_processes`, `--process_id`), bounded
  in time by a watchdog process; the chief; the guard that reports a
  process that stopped.
- `workers`: what the workers or processes of a run do together: the
  chief's set-up that the others check (`chief_first`), each process's
  share of a batch, its local model for evaluation.
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
- `seq2seq`: what the encoder-decoder recipes (translate, summarize,
  dialogue) share before TensorFlow: their flags, their checks, the
  `Task` a recipe gives `seq2seq_run`.
- `seq2seq_run`: their training, decoding, scoring and export
  (`run_seq2seq`, `run`); `seq2seq_model` (the `SynthesizerSeq2SeqLM`,
  its preprocessor, features and decoding) and `seq2seq_export` (the
  serving SavedModel) are its TensorFlow parts.
- `parallel_data`: `Parallel` texts and their readers (`read_lines`,
  tensorflow_datasets splits).
- `text_metrics`: ROUGE-1/2/L in pure Python.

Importing these modules needs no TensorFlow and does not select a Keras
backend (except `seq2seq_model` and `seq2seq_export`, which need
TensorFlow): the TensorFlow-specific helpers import it when called.
"""
