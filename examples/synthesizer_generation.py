"""Cached generation with Synthesizer blocks and keras-nlp samplers.

Trains two tiny models on toy tasks (seconds on a CPU), then decodes with
`keras_hub.samplers.GreedySampler`, `BeamSampler` and `TopKSampler`, with
the decoding cache of `SynthesizerDecoder` (built with `initial_cache`):

- a decoder-only language model that continues counting sequences
  (`3 4 5 6 ...`, modulo the vocabulary);
- an encoder-decoder model that reverses its source sequence (self-attention
  synthesized, cross-attention vanilla as in the paper).

Every generation is also run without the cache (a full forward pass per
step) and must produce the same tokens. Prints progress to stderr and one
JSON document with accuracies, the cache layout and the checks.

    KERAS_BACKEND=jax python examples/synthesizer_generation.py \
        --synthesizer random --steps 300
"""

import argparse
import json
import sys
import time

import keras
import numpy as np
from keras import ops

from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder
import keras_hub
from keras_synth.models.generation_utils import decode_with_caches
from keras_synth.models.generation_utils import (
    initial_cross_attention_caches,
)
from keras_synth.models.generation_utils import (
    initial_self_attention_caches,
)

BOS = 1  # token 0 is padding, 1 starts the target of the seq2seq model


class TinyTransformer(keras.Model):
    """Decoder-only (`encoder=False`) or encoder-decoder Synthesizer model."""

    def __init__(self, vocabulary, length, synthesizer, encoder=False,
                 hidden=32, heads=4, layers=2, **kwargs):
        super().__init__(**kwargs)
        self.length = length
        self.embedding = keras_hub.layers.TokenAndPositionEmbedding(
            vocabulary, length, hidden
        )
        self.blocks = [
            SynthesizerDecoder(4 * hidden, heads, synthesizer=synthesizer,
                               max_length=length)
            for _ in range(layers)
        ]
        self.head = keras.layers.Dense(vocabulary)
        self.has_encoder = encoder
        if encoder:
            self.source_embedding = keras_hub.layers.TokenAndPositionEmbedding(
                vocabulary, length, hidden
            )
            self.encoders = [
                SynthesizerEncoder(4 * hidden, heads, synthesizer=synthesizer,
                                   max_length=length)
                for _ in range(layers)
            ]

    def encode(self, source):
        x = self.source_embedding(source)
        for encoder in self.encoders:
            x = encoder(x)
        return x

    def call(self, inputs):
        if self.has_encoder:
            source, target = inputs
            encoded = self.encode(source)
        else:
            target, encoded = inputs, None
        x = self.embedding(target)
        for block in self.blocks:
            x = block(x, encoded)
        return self.head(x)

    # ----------------------------------------------------------- generation

    def initial_cache(self, batch_size, source_length=None):
        """Per-layer caches from `SynthesizerDecoder.initial_cache`."""
        caches = initial_self_attention_caches(
            self.blocks, batch_size, self.length, None
        )
        if not self.has_encoder:
            return caches
        return caches, initial_cross_attention_caches(
            self.blocks, batch_size, source_length, None
        )

    def call_with_cache(self, tokens, cache, index, encoded=None,
                        fill_cross=False):
        x = self.embedding(tokens, start_index=index)
        if encoded is None:
            x, cache = decode_with_caches(self.blocks, x, cache, index)
            return self.head(x), cache
        x, self_caches, cross_caches = decode_with_caches(
            self.blocks, x, cache[0], index, encoded, cache[1], fill_cross
        )
        return self.head(x), (self_caches, cross_caches)

    def generate(self, sampler, prompt, prompt_length, source=None,
                 cached=True):
        """As keras-nlp's `generate_step`: seed the cache, then sample."""
        encoded = self.encode(source) if self.has_encoder else None
        batch_size = prompt.shape[0]
        mask = np.broadcast_to(
            np.arange(self.length)[None, :] < prompt_length, prompt.shape
        )
        cache = None
        if cached:
            cache = self.initial_cache(
                batch_size, None if source is None else source.shape[1]
            )
            _, cache = self.call_with_cache(prompt, cache, 0, encoded,
                                            fill_cross=True)

        def next(prompt, cache, index):
            enc, src = encoded, source
            if self.has_encoder and prompt.shape[0] != batch_size:
                beams = prompt.shape[0] // batch_size  # BeamSampler
                enc = ops.repeat(encoded, beams, axis=0)
                src = np.repeat(source, beams, axis=0)
            if cached:
                token = ops.slice(prompt, (0, index - 1),
                                  (ops.shape(prompt)[0], 1))
                logits, cache = self.call_with_cache(token, cache, index - 1,
                                                     enc)
                return logits[:, 0], None, cache
            logits = self((src, prompt) if self.has_encoder else prompt)
            return ops.take(logits, index - 1, axis=1), None, cache

        return ops.convert_to_numpy(
            sampler(next=next, prompt=prompt, cache=cache,
                    index=prompt_length, mask=mask)
        )


def counting_data(rng, n, length, vocabulary):
    start = rng.integers(2, vocabulary, size=(n, 1))
    return (start + np.arange(length)[None, :] - 2) % (vocabulary - 2) + 2


def reversal_data(rng, n, length, vocabulary):
    source = rng.integers(2, vocabulary, size=(n, length - 1))
    target = np.concatenate(
        [np.full((n, 1), BOS), source[:, ::-1]], axis=1
    )
    return source, target


def train(model, inputs, targets, steps, batch_size, label):
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    n = len(targets)
    epochs = max(1, steps * batch_size // n)
    start = time.time()
    history = model.fit(inputs, targets, batch_size=batch_size,
                        epochs=epochs, verbose=0)
    loss = float(history.history["loss"][-1])
    print(f"[{label}] trained {epochs} epochs in {time.time() - start:.1f}s,"
          f" final loss {loss:.4f}", file=sys.stderr, flush=True)
    return loss


def samplers(seed):
    return {
        "greedy": lambda: keras_hub.samplers.GreedySampler(),
        "beam": lambda: keras_hub.samplers.BeamSampler(num_beams=3),
        "top_k": lambda: keras_hub.samplers.TopKSampler(k=2, seed=seed),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthesizer", default="random")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--length", type=int, default=12)
    parser.add_argument("--vocabulary", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    length, vocabulary = args.length, args.vocabulary
    results = {"backend": keras.backend.backend(),
               "synthesizer": args.synthesizer, "tasks": {}}

    # Decoder-only LM: continue counting.
    lm = TinyTransformer(vocabulary, length, args.synthesizer)
    data = counting_data(rng, 2048, length + 1, vocabulary)
    loss = train(lm, data[:, :-1], data[:, 1:], args.steps, 64, "lm")
    prompt_length = 3
    test = counting_data(rng, 8, length, vocabulary)
    prompt = np.where(np.arange(length) < prompt_length, test, 0)
    task = {"final_loss": loss, "cache_shape_per_layer": list(
        lm.blocks[0].initial_cache(8, length).shape)}
    for name, make in samplers(args.seed).items():
        tokens = lm.generate(make(), prompt, prompt_length)
        uncached = lm.generate(make(), prompt, prompt_length, cached=False)
        task[name] = {
            "token_accuracy": float(np.mean(
                tokens[:, prompt_length:] == test[:, prompt_length:])),
            "same_as_uncached": bool(np.array_equal(tokens, uncached)),
            "example": tokens[0].tolist(),
        }
        print(f"[lm] {name}: {task[name]}", file=sys.stderr, flush=True)
    results["tasks"]["decoder_only_counting"] = task

    # Encoder-decoder: reverse the source.
    seq2seq = TinyTransformer(vocabulary, length, args.synthesizer,
                              encoder=True)
    source, target = reversal_data(rng, 4096, length, vocabulary)
    loss = train(seq2seq, (source, target[:, :-1]), target[:, 1:],
                 args.steps, 64, "seq2seq")
    source, target = reversal_data(rng, 8, length, vocabulary)
    prompt = np.zeros((8, length - 1), "int32")
    prompt[:, 0] = BOS
    block = seq2seq.blocks[0]
    task = {
        "final_loss": loss,
        "cache_shape_per_layer": list(block.initial_cache(8, length).shape),
        "cross_cache_shape_per_layer": list(
            block.initial_cross_attention_cache(8, length - 1).shape),
    }
    seq2seq.length = length - 1  # the decoder input is length - 1 long
    for name, make in samplers(args.seed).items():
        tokens = seq2seq.generate(make(), prompt, 1, source)
        uncached = seq2seq.generate(make(), prompt, 1, source, cached=False)
        task[name] = {
            "token_accuracy": float(np.mean(tokens[:, 1:] == target[:, 1:-1])),
            "same_as_uncached": bool(np.array_equal(tokens, uncached)),
            "example_source": source[0].tolist(),
            "example_output": tokens[0].tolist(),
        }
        print(f"[seq2seq] {name}: {task[name]}", file=sys.stderr, flush=True)
    results["tasks"]["encoder_decoder_reversal"] = task

    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    checks = [t[s]["same_as_uncached"] for t in results["tasks"].values()
              for s in ("greedy", "beam", "top_k")]
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
