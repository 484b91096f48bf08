"""Parameter counts and decoding-cache memory of Synthesizer encoder-decoders.

Builds (without running) a Transformer-base sized encoder-decoder for every
variant: 6 `SynthesizerEncoder` + 6 `SynthesizerDecoder` blocks, width 512,
8 heads, feedforward 2048, `max_length` 256; self-attention synthesized,
cross-attention vanilla (as in the paper); a shared 32,000-token embedding
tied to the output softmax plus learned positions (256 x 512) on each side.
Prints one JSON document: parameter counts per variant (blocks only, and
the whole model) and cache bytes per token per layer.

    KERAS_BACKEND=jax python examples/block_parameter_counts.py [--out FILE]
"""

import argparse
import json
import sys

import keras

from keras_synth.layers import SynthesizerDecoder
from keras_synth.layers import SynthesizerEncoder

VARIANTS = [
    "vanilla",
    "dense",
    "random",
    "fixed_random",
    "factorized_dense",
    "factorized_random",
    "random+vanilla",
    "dense+vanilla",
    "random+dense",
]


def count(variant, layers=6, width=512, heads=8, ffn=2048, max_length=256,
          vocabulary=32000):
    shape = (1, max_length, width)
    blocks = []
    for i in range(layers):
        encoder = SynthesizerEncoder(ffn, heads, synthesizer=variant,
                                     max_length=max_length)
        encoder.build(shape)
        decoder = SynthesizerDecoder(ffn, heads, synthesizer=variant,
                                     max_length=max_length)
        decoder.build(shape, shape)
        blocks += [encoder, decoder]
    trainable = sum(
        int(sum(keras.ops.size(w) for w in b.trainable_weights))
        for b in blocks
    )
    total = sum(b.count_params() for b in blocks)
    # Shared token embedding (tied softmax) + source and target positions.
    embeddings = vocabulary * width + 2 * max_length * width
    decoder = blocks[1]
    itemsize = 4  # float32
    self_cache = decoder.initial_cache(1, max_length)
    cross_cache = decoder.initial_cross_attention_cache(1, max_length)
    per_token = lambda c: int(keras.ops.size(c)) * itemsize // max_length
    return {
        "blocks_params": total,
        "blocks_trainable_params": trainable,
        "model_params": total + embeddings,
        "self_attention_cache_shape_per_layer": list(self_cache.shape),
        "self_attention_cache_bytes_per_token_per_layer_float32": per_token(
            self_cache
        ),
        "cross_attention_cache_bytes_per_source_token_per_layer_float32": (
            per_token(cross_cache)
        ),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    results = {
        "config": {
            "encoder_layers": 6, "decoder_layers": 6, "hidden_dim": 512,
            "num_heads": 8, "intermediate_dim": 2048, "max_length": 256,
            "vocabulary": 32000, "embeddings": "shared, tied to the softmax",
            "cross_attention": "vanilla",
        },
        "variants": {},
    }
    for variant in VARIANTS:
        print(f"counting {variant} ...", file=sys.stderr, flush=True)
        results["variants"][variant] = count(variant)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
