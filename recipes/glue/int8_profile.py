"""`python -m recipes.glue.int8_profile`: where an int8 `Dense` spends its
time on the CPU, on the current Keras backend.

For each `(input width, output width)` in `--shapes`, over `--tokens` rows,
with `model.predict` (the path `recipes.glue.quantize` times), after one
untimed pass, the median of `--repetitions`:

- `float32`: a float `Dense`;
- `int8`: the same after `quantize("int8")` (Keras's int8 layer: inputs
  quantized per row on every call, an int8 x int8 -> int32 product,
  rescaled to float);
- `quantize inputs`: Keras's `abs_max_quantize` of the inputs alone;
- `int8 matmul`: `ops.matmul` of int8 inputs and an int8 kernel alone;
- `int8 GEMM kernel` (PyTorch only): `torch._int_mm`, the int8 kernel
  Keras calls on CUDA only, here on the CPU.

Writes `int8_profile-<backend>.json` in `--output_dir` and prints the table
in milliseconds per `--tokens` rows.
"""

import argparse
import json
import os

from recipes import cli
from recipes.benchmark import stats
from recipes.core import flags


def shape_list(text):
    """`type=` of `--shapes`: `K1xN1,K2xN2,...`."""
    try:
        shapes = [tuple(int(n) for n in item.split("x"))
                  for item in text.split(",")]
    except ValueError:
        shapes = None
    if not shapes or any(len(s) != 2 or min(s) < 1 for s in shapes):
        raise argparse.ArgumentTypeError(
            "must be comma-separated INPUTxOUTPUT widths, e.g. 128x512")
    return shapes


shape_list.names_the_flag = True


def build_parser():
    parser = cli.ArgumentParser(
        prog="python -m recipes.glue.int8_profile",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", type=shape_list,
                        default=shape_list("128x512,512x2048,1024x4096"),
                        help="INPUTxOUTPUT widths of the Dense layers timed "
                        "(default: 128x512,512x2048,1024x4096).")
    parser.add_argument("--tokens", type=flags.positive_int, default=2048,
                        help="Rows per batch (default 2048: batch 32 of "
                        "length 64).")
    parser.add_argument("--batches", type=flags.positive_int, default=8,
                        help="Batches per timed pass (default 8).")
    parser.add_argument("--repetitions", type=flags.positive_int, default=5,
                        help="Timed passes; the median is reported.")
    parser.add_argument("--output_dir", default=".",
                        help="Where int8_profile-<backend>.json goes.")
    return parser


def profile_shape(k, n, args):
    """Milliseconds per `--tokens` rows of each part, for `k -> n`."""
    import keras
    import numpy as np
    from keras import ops

    rows = args.tokens * args.batches
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, k)).astype("float32")

    def per_batch(model, data):
        seconds = stats.median_seconds(lambda: model.predict(
            data, batch_size=args.tokens, verbose=0), args.repetitions)
        return 1e3 * seconds / args.batches

    inputs = keras.Input((k,))
    dense = keras.layers.Dense(n, use_bias=False)
    float_model = keras.Model(inputs, dense(inputs))
    int8_dense = keras.layers.Dense(n, use_bias=False)
    int8_model = keras.Model(inputs, int8_dense(inputs))
    int8_model.set_weights(float_model.get_weights())
    int8_dense.quantize("int8")
    quantized, _ = keras.quantizers.abs_max_quantize(x, axis=-1)
    quantizer = keras.Model(inputs, keras.layers.Lambda(
        lambda t: ops.cast(keras.quantizers.abs_max_quantize(t, axis=-1)[0],
                           "float32"))(inputs))
    int_inputs = keras.Input((k,), dtype="int8")
    # A copy: JAX's predict may donate (delete) the layer's own buffer.
    kernel = ops.convert_to_tensor(
        np.array(ops.convert_to_numpy(int8_dense.kernel)))
    int_matmul = keras.Model(int_inputs, keras.layers.Lambda(
        lambda t: ops.cast(ops.matmul(t, kernel), "float32"))(int_inputs))
    row = {
        "input_width": k, "output_width": n, "tokens": args.tokens,
        "float32_ms": per_batch(float_model, x),
        "int8_ms": per_batch(int8_model, x),
        "quantize_inputs_ms": per_batch(quantizer, x),
        "int8_matmul_ms": per_batch(
            int_matmul, ops.convert_to_numpy(quantized)),
    }
    if keras.backend.backend() == "torch":
        import torch

        a = torch.as_tensor(ops.convert_to_numpy(quantized)[:args.tokens])
        b = torch.as_tensor(ops.convert_to_numpy(kernel))
        try:
            row["int8_gemm_kernel_ms"] = 1e3 * stats.median_seconds(
                lambda: torch._int_mm(a, b), args.repetitions)
        except RuntimeError as error:  # no CPU kernel in this build
            row["int8_gemm_kernel_error"] = str(error).splitlines()[0]
        fa, fb = a.float(), b.float()
        row["float32_gemm_kernel_ms"] = 1e3 * stats.median_seconds(
            lambda: torch.matmul(fa, fb), args.repetitions)
    return row


def main(argv=None):
    args = build_parser().parse_args(argv)
    cli.import_quietly(("keras",))
    import keras

    backend = keras.backend.backend()
    rows = []
    for k, n in args.shapes:
        row = profile_shape(k, n, args)
        rows.append(row)
        print(f"{backend} {k}x{n}: " + ", ".join(
            f"{name[:-3]} {value:.2f} ms" for name, value in row.items()
            if name.endswith("_ms")), flush=True)
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, f"int8_profile-{backend}.json")
    with open(path, "w") as f:
        json.dump({"backend": backend, "keras_version": keras.__version__,
                   "load_average": os.getloadavg(), "rows": rows}, f,
                  indent=2)
    print(f"Results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
