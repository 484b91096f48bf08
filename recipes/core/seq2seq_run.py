"""The training, decoding and export of every encoder-decoder recipe
(translation, summarization, dialogue): `run_seq2seq` trains a
`SynthesizerSeq2SeqLM`, decodes and scores as the recipe's
`recipes.core.seq2seq.Task` says, and exports; `run` opens the run
first.

Importing it needs no TensorFlow; running it does (TensorFlow backend).
"""

import time

from recipes import serving
from recipes.core import experiment
from recipes.core import flags
from recipes.core import presets
from recipes.core import seq2seq
from recipes.core import storage
from recipes.core import timing
from recipes.core import vocabulary
from recipes.core import workers


def run_seq2seq(args, prog, corpus, run_dir, strategy, task, wall_start,
                log=print):
    """Trains a `SynthesizerSeq2SeqLM` on `corpus` (`{split:
    parallel_data.Parallel}`), decodes and scores the valid and test splits
    as `task` says, exports; returns the results dict. `prog` names the
    recipe in messages."""
    corpus["train"] = corpus["train"].head(args.max_train_examples)
    src_name, tgt_name = task.sides
    log(f"Data ({args.dataset}, {src_name}->{tgt_name}): " + ", ".join(
        f"{split} {len(pairs)} pairs" for split, pairs in corpus.items()))

    from recipes.core import seq2seq_export as export_lib
    from recipes.core import seq2seq_model as modeling

    train = corpus["train"]
    source_length = getattr(args, "max_source_length", args.max_length)
    target_length = getattr(args, "max_target_length", args.max_length)

    def prepare():  # the chief's vocabularies and backup, for every worker
        if args.vocab == "shared":
            src_vocab = tgt_vocab = vocabulary.prepare_vocabulary(
                run_dir, lambda: train.src + train.tgt,
                vocab_file=(presets.read_preset(
                    args.preset, seq2seq.PRESET_BACKBONES,
                    prog).vocabulary_path
                    if args.preset else args.vocab_file),
                vocab_size=args.vocab_size,
                lowercase=args.lowercase, log=log)
        else:
            src_vocab = vocabulary.prepare_vocabulary(
                run_dir, lambda: train.src, vocab_file=args.vocab_file,
                vocab_size=args.vocab_size, lowercase=args.lowercase,
                log=log, filename=f"vocab.{src_name}.txt")
            tgt_vocab = vocabulary.prepare_vocabulary(
                run_dir, lambda: train.tgt, vocab_file=args.tgt_vocab_file,
                vocab_size=args.vocab_size, lowercase=args.lowercase,
                log=log, filename=f"vocab.{tgt_name}.txt")
        return src_vocab, tgt_vocab, run_dir.resume()

    src_vocab, tgt_vocab, initial_epoch = workers.chief_first(
        strategy, prepare)
    preprocessor = modeling.make_preprocessor(
        src_vocab, tgt_vocab, source_length, args.lowercase,
        target_length=target_length,
        truncation="allow" if task.cut else "warn")  # (counted, logged)
    encoded = modeling.encode_corpus(preprocessor, train, cut=task.cut)
    if task.cut:
        log(f"Training pairs: {encoded['kept']} kept, {encoded['empty']} "
            f"dropped (an empty side); cut: {encoded['cut_source']} with a "
            f"{src_name} longer than --max_source_length={source_length} "
            f"tokens with [CLS] and [SEP], {encoded['cut_target']} with a "
            f"{tgt_name} longer than --max_target_length={target_length} "
            "with [CLS].")
    else:
        log(f"Training pairs: {encoded['kept']} kept, {encoded['dropped']} "
            f"dropped (a source longer than --max_length={args.max_length} "
            "tokens with [CLS] and [SEP], a target longer with [CLS], or an "
            f"empty side: {encoded['empty']}).")
    if encoded["kept"] < args.batch_size:
        raise ValueError(
            f"Argument `--batch_size`={args.batch_size} exceeds the "
            f"{encoded['kept']} usable training pairs.")
    static = flags.static_shapes(args)
    bucketed = flags.bucketed_shapes(args)
    train_ds = modeling.make_dataset(
        encoded, args.batch_size, shuffle=True, seed=args.seed,
        drop_remainder=True, static_shapes=static, epochs=args.epochs,
        initial_epoch=initial_epoch, bucketed=bucketed)
    valid_ds = None
    if "valid" in corpus:
        valid_encoded = modeling.encode_corpus(preprocessor, corpus["valid"],
                                               cut=task.cut)
        if valid_encoded["kept"]:
            valid_ds = modeling.make_dataset(
                valid_encoded, args.batch_size, static_shapes=static,
                bucketed=bucketed)
    steps_per_epoch = encoded["kept"] // args.batch_size
    steps_per_execution = flags.steps_per_execution(
        args.steps_per_execution, args.strategy, steps_per_epoch)
    total_steps = steps_per_epoch * args.epochs
    warmup_steps = args.warmup_steps or max(
        1, int(total_steps * args.warmup_fraction))
    def build():
        model = modeling.build_lm(
            src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
            max_length=args.max_length, synthesizer=args.synthesizer,
            cross_attention_synthesizer=args.cross_attention_synthesizer,
            hidden_dim=args.hidden_dim, num_layers=args.num_layers,
            num_heads=args.num_heads, intermediate_dim=args.intermediate_dim,
            dropout=args.dropout, shared=args.vocab == "shared",
            normalize_first=args.normalize_first,
            synthesizer_options=args.synthesizer_options,
            preset=args.preset)
        modeling.compile_lm(
            model, args.learning_rate, warmup_steps,
            label_smoothing=args.label_smoothing,
            weight_decay=args.weight_decay, jit_compile=flags.keras_jit_compile(args),
            ema_momentum=args.ema_momentum, beam_size=args.beam_size,
            length_penalty=args.length_penalty,
            steps_per_execution=steps_per_execution)
        return model

    def describe(parameters):
        return (f"Model: SynthesizerSeq2SeqLM, {args.num_layers}+"
                f"{args.num_layers} blocks, self-attention "
                f"{args.synthesizer!r}, cross-attention "
                f"{args.cross_attention_synthesizer!r}, width "
                f"{args.hidden_dim}, {args.num_heads} heads, max_length "
                f"{args.max_length}, vocabulary {len(src_vocab)}/"
                f"{len(tgt_vocab)} ({args.vocab}): {parameters:,} trainable "
                "parameters.")

    def evaluate(model, run):
        tokens_per_pair = (encoded["src_tokens"] + encoded["tgt_tokens"]
                           ) / max(1, encoded["kept"])
        speed = timing.training_speed(
            run["steps_per_second"], args.batch_size * tokens_per_pair,
            "source + target, padding excluded", "steps/s x batch_size x "
            "mean (source + target) tokens of the kept training pairs, "
            "padding excluded", log, about=True)

        # The preprocessor is attached now: `fit` was fed features.
        model.preprocessor = preprocessor
        outputs = {}
        # The pairs decoded and scored: the first --max_decode_examples.
        evaluated = {split: corpus[split].head(args.max_decode_examples)
                     for split in ("valid", "test") if split in corpus}
        decoded = {}
        for split, pairs in evaluated.items():
            decoded[split] = {"decoded": len(pairs), "of": len(corpus[split])}
            if len(pairs) < len(corpus[split]):
                log(f"{split}: decoding and scoring the first {len(pairs)} "
                    f"of {len(corpus[split])} pairs (--max_decode_examples="
                    f"{args.max_decode_examples}).")
        for beam_size in task.searches(args):
            modeling.set_sampler(model, beam_size, args.length_penalty)
            search = "greedy" if beam_size == 1 else f"beam {beam_size}"
            outputs[beam_size] = {}
            for split, pairs in evaluated.items():
                hypotheses, stats = modeling.translate(
                    model, pairs.src, batch_size=args.decode_batch_size,
                    log=log, length_flag=task.length_flag)
                stats["beam_size"] = beam_size
                scores = task.score(hypotheses, pairs.tgt)
                log(f"{split}: {task.describe(scores)} ({len(pairs)} "
                    f"{src_name}s, {search}, "
                    f"{stats['sentences_per_second']:.1f} {src_name}s/s).")
                path = None
                if run_dir.is_chief:
                    path = run_dir.path(task.output_file(split, beam_size))
                    storage.write_file(path, "".join(
                        line + "\n" for line in hypotheses))
                    log(f"Outputs: {path}")
                outputs[beam_size][split] = {
                    "scores": scores, "decoding": stats, "file": path}

        return {
            **task.results(outputs),
            "dataset": args.dataset,
            "synthesizer": args.synthesizer,
            "cross_attention_synthesizer": args.cross_attention_synthesizer,
            "vocabulary_size": {"src": len(src_vocab),
                                "tgt": len(tgt_vocab)},
            "decoded_pairs": decoded,
            "train_pairs": encoded["kept"],
            "train_pairs_dropped": encoded["dropped"],
            **speed,
            "warmup_steps": warmup_steps,
            **({"cut": {"train": {"source": encoded["cut_source"],
                                  "target": encoded["cut_target"]},
                        **{split: {"source": o["decoding"]["truncated"]}
                           for split, o in outputs[beam_size].items()}}}
               if task.cut else {}),
        }
    endpoint = task.endpoint or seq2seq.TRANSLATE
    saved_model = experiment.saved_model_export(
        args, run_dir,
        lambda path, model: export_lib.export_saved_model(path, model,
                                                          endpoint),
        lambda path: export_lib.export_usage(path, endpoint), endpoint.what,
        log)

    def export(model):  # on the chief, the preprocessor attached
        results = saved_model(model)
        if "keras_model" not in results:  # (saved in the export's stead)
            results["keras_model"] = serving.save_keras_model(
                run_dir.path("model.keras"), model)
            log(f"Saved the model to {results['keras_model']}")
        return results

    return experiment.train_and_evaluate(
        args, run_dir, strategy, build, train_ds, steps_per_epoch, evaluate,
        export=export, describe=describe,
        fit_options={"validation_data": valid_ds},
        wall_start=wall_start, log=log)


def run(args, prog, validate, load, make_task, log=print):
    """Opens the run (`validate(args, check_options)`, `load(args)` the
    corpus; the strategy first, before TensorFlow runs any op:
    multi-worker, TPU) and runs `run_seq2seq` with `make_task(args, corpus,
    log)`; returns the results dict."""
    wall_start = time.time()
    corpus, run_dir, strategy = experiment.open_run(
        args, validate, lambda _: load(args), seq2seq.RUNTIME_FLAGS, log)
    return run_seq2seq(args, prog, corpus, run_dir, strategy,
                       make_task(args, corpus, log), wall_start, log)
