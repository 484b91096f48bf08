"""ListOps (Long Range Arena): generated, seeded, cached; or LRA's TSV files.

A ListOps example is a nested expression of the operators `[MIN`, `[MAX`,
`[MED` (median, rounded down) and `[SM` (sum modulo 10) over the digits
0-9, each operator closed by `]`, e.g. `[MAX 2 9 [MIN 4 7 ] 0 ]`; its label
is the value, 0-9. The generator follows the rules of Long Range Arena's
(`lra_benchmarks/data/listops.py` in google-research/long-range-arena):

- a node at depth `d < max_depth` (the root at depth 1) is an operator with
  probability `OPERATOR_P` (0.25), else a digit; at `max_depth` a digit;
- an operator has 2 to `max_args` arguments (uniform) and one of the four
  operators (uniform); each argument is a node one level deeper;
- the length of a tree is its number of tokens (operators, digits and
  closing brackets); a tree is kept when `min_length < length <
  max_length` (LRA's strict bounds) and it is not a repeat of one kept
  before;
- LRA's split sizes: 96,000 training, 2,000 validation and 2,000 test
  examples, in the order generated.

Unlike LRA's generator (Python's global `random`, and a `set` whose order
changes from one process to the next), this one draws from
`random.Random(seed)` and keeps the trees in the order generated: the same
seed gives the same files. The files are LRA's: `basic_train.tsv`,
`basic_val.tsv`, `basic_test.tsv`, tab-separated with the header
`Source<TAB>Target`, the expression written as LRA's generator writes it
(each operator's arguments nested in parentheses, `( ( [MAX 2 ) 9 ) ] )`
for `[MAX 2 9 ]`), so that `--data_dir` reads LRA's release and the
generated set alike.

Tokenization (`encode`): the tokens are split at spaces and the
parentheses dropped; `[MIN`, `[MAX`, `[MED`, `[SM`, `]` and each digit are
one token each (`VOCABULARY`). (LRA's own pipeline, tfds'
`deprecated.text.Tokenizer`, keeps only alphanumeric runs, so it drops the
brackets and with them where each operator ends; here they are tokens.)

Pure Python: no TensorFlow.
"""

import random

from recipes.core import storage
from recipes.core.storage import join
from recipes.core.data_files import DataError
from recipes.lm import data as lm_data

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
END = "]"
DIGITS = tuple(str(d) for d in range(10))
# The probability that a node above the deepest level is an operator (LRA's
# `VALUE_P`: a draw above it is a digit).
OPERATOR_P = 0.25
# The tokens of a ListOps sequence after the reserved ones: `[PAD]` 0 and
# `[CLS]` 1 (the pooled token, prepended to every sequence).
RESERVED = ("[PAD]", "[CLS]")
VOCABULARY = RESERVED + OPERATORS + (END,) + DIGITS
PAD_ID, CLS_ID = 0, 1
SPLITS = ("train", "val", "test")
# LRA's split sizes and generator defaults.
DEFAULTS = {"train_size": 96000, "val_size": 2000, "test_size": 2000,
            "min_length": 500, "max_length": 2000, "max_depth": 10,
            "max_args": 10}
HEADER = ("Source", "Target")


def file_name(split, task="basic"):
    """LRA's name of a split's file: `basic_train.tsv` etc."""
    return f"{task}_{split}.tsv"


# ------------------------------------------------------------- generation


def generate_tree(rng, max_depth, max_args, depth=1):
    """One random tree: a digit (int) or `(operator, [arguments])`.

    Returns:
        `(tree, length)`, `length` its number of tokens.
    """
    if depth < max_depth and rng.random() < OPERATOR_P:
        count = rng.randint(2, max_args)
        arguments, length = [], 2  # the operator and its `]`
        for _ in range(count):
            argument, size = generate_tree(rng, max_depth, max_args,
                                           depth + 1)
            arguments.append(argument)
            length += size
        return (rng.choice(OPERATORS), arguments), length
    return rng.randrange(10), 1


def value(tree):
    """The value of a tree (0-9): MIN, MAX, MED (the median, the mean of
    the two middle values rounded down for an even count, as LRA's
    `int(np.median(...))`) and SM (the sum modulo 10)."""
    if isinstance(tree, int):
        return tree
    operator, arguments = tree
    values = [value(argument) for argument in arguments]
    if operator == "[MIN":
        return min(values)
    if operator == "[MAX":
        return max(values)
    if operator == "[SM":
        return sum(values) % 10
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) // 2


def to_source(tree):
    """The tree as LRA's generator writes it: the operator and its first
    argument in parentheses, each further argument and the closing `]`
    wrapping what comes before (`( ( ( [MAX 2 ) 9 ) ] )`)."""
    if isinstance(tree, int):
        return str(tree)
    operator, arguments = tree
    text = f"( {operator} {to_source(arguments[0])} )"
    for argument in arguments[1:]:
        text = f"( {text} {to_source(argument)} )"
    return f"( {text} {END} )"


def check_parameters(train_size, val_size, test_size, min_length,
                     max_length, max_depth, max_args):
    """Raises a ValueError naming the flag of a bad generator parameter."""
    for name, number in (("train_size", train_size), ("val_size", val_size),
                         ("test_size", test_size), ("max_depth", max_depth)):
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"Argument `--listops_{name}` must be a "
                             f"positive integer. Received: "
                             f"--listops_{name}={number!r}")
    if not isinstance(max_args, int) or max_args < 2:
        raise ValueError("Argument `--listops_max_args` must be an integer "
                         "of at least 2 (an operator takes 2 or more "
                         f"arguments). Received: --listops_max_args="
                         f"{max_args!r}")
    if not 0 <= min_length < max_length - 1:
        raise ValueError(
            "Arguments `--listops_min_length` and `--listops_max_length` "
            "must satisfy 0 <= min_length < max_length - 1 (a kept tree is "
            "strictly longer than min_length and strictly shorter than "
            f"max_length). Received: --listops_min_length={min_length}, "
            f"--listops_max_length={max_length}")
    longest = _longest_tree(max_depth, max_args)
    if longest <= min_length:
        raise ValueError(
            f"No tree of depth at most --listops_max_depth={max_depth} "
            f"with at most --listops_max_args={max_args} arguments is "
            f"longer than --listops_min_length={min_length} (the longest "
            f"has {longest} tokens).")


def _longest_tree(max_depth, max_args):
    length = 1
    for _ in range(max_depth - 1):
        length = 2 + max_args * length
    return length


def generate(seed, train_size=DEFAULTS["train_size"],
             val_size=DEFAULTS["val_size"], test_size=DEFAULTS["test_size"],
             min_length=DEFAULTS["min_length"],
             max_length=DEFAULTS["max_length"],
             max_depth=DEFAULTS["max_depth"], max_args=DEFAULTS["max_args"],
             max_tries=None):
    """The three splits, `{"train": [(source, label)], "val": ...,
    "test": ...}`, drawn from `random.Random(seed)` (see the module
    docstring).

    Args:
        max_tries: the most trees drawn before giving up (default: 1,000
            per example asked for).

    Raises:
        ValueError: bad parameters, or too few trees within bounds after
            `max_tries` draws.
    """
    check_parameters(train_size, val_size, test_size, min_length,
                     max_length, max_depth, max_args)
    rng = random.Random(seed)
    wanted = train_size + val_size + test_size
    max_tries = 1000 * wanted if max_tries is None else max_tries
    kept = {}  # source -> label, in the order generated
    tries = 0
    while len(kept) < wanted:
        if tries >= max_tries:
            raise ValueError(
                f"ListOps: only {len(kept)} distinct trees of the {wanted} "
                f"asked for had a length in ({min_length}, {max_length}) "
                f"after {tries} draws. Widen the lengths "
                "(--listops_min_length, --listops_max_length) or ask for "
                "fewer examples.")
        tries += 1
        tree, length = generate_tree(rng, max_depth, max_args)
        if min_length < length < max_length:
            kept.setdefault(to_source(tree), value(tree))
    rows = list(kept.items())
    return {"train": rows[:train_size],
            "val": rows[train_size:train_size + val_size],
            "test": rows[train_size + val_size:]}


# ------------------------------------------------------------ TSV files


def write_tsv(path, rows):
    """Writes `(source, label)` rows as LRA's TSV file (header
    `Source<TAB>Target`)."""
    lines = ["\t".join(HEADER)] + [f"{source}\t{label}"
                                   for source, label in rows]
    storage.write_file(path, "\n".join(lines) + "\n")
    return path


def read_tsv(path):
    """The `(source, label)` rows of a ListOps TSV file (LRA's release or
    `write_tsv`'s; `.gz` read transparently).

    Raises:
        DataError: naming the file and line, for a missing or empty file,
            another header, a row without two fields or a label that is
            not a digit.
    """
    text = lm_data.read_text_file(path, "ListOps TSV file")
    lines = text.splitlines()
    header = tuple(lines[0].rstrip("\r").split("\t"))
    if header != HEADER:
        raise DataError(
            f"The ListOps TSV file {path} starts with {lines[0]!r}; "
            "expected LRA's header 'Source<TAB>Target'.")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 2 or fields[1].strip() not in DIGITS:
            raise DataError(
                f"The ListOps TSV file {path}, line {number}: expected "
                "'expression<TAB>label' with a label 0-9. Received: "
                f"{line[:80]!r}")
        rows.append((fields[0], int(fields[1])))
    if not rows:
        raise DataError(f"The ListOps TSV file {path} holds no example.")
    return rows


def read_splits(data_dir, task="basic"):
    """`{"train", "val", "test"}` rows from `data_dir`'s
    `basic_train.tsv`, `basic_val.tsv` and `basic_test.tsv` (LRA's
    `listops-1000/` folder; each may also be `.tsv.gz`)."""
    splits = {}
    for split in SPLITS:
        path = join(data_dir, file_name(split, task))
        gfile = storage.gfile()
        if not gfile.exists(path) and gfile.exists(path + ".gz"):
            path += ".gz"
        splits[split] = read_tsv(path)
    return splits


def cache_folder(cache_dir, seed, parameters):
    """Where the generated set of `seed` and `parameters` (the keys of
    `DEFAULTS`) is cached under `cache_dir`: one folder per set."""
    p = parameters
    name = (f"listops-seed{seed}-n{p['train_size']}-{p['val_size']}-"
            f"{p['test_size']}-len{p['min_length']}-{p['max_length']}-"
            f"depth{p['max_depth']}-args{p['max_args']}")
    return join(cache_dir, name)


def cached_splits(cache_dir, seed, parameters, write=True, log=print):
    """The generated splits of `seed` and `parameters`, generated once and
    written into `cache_folder(...)`, read from there afterwards: the set
    is complete once its `generator.json`, written last, is there (a set
    a kill cut short is generated and written again). With `write=False`
    (a worker other than the chief) a missing set is generated, not
    written."""
    folder = cache_folder(cache_dir, seed, parameters)
    gfile = storage.gfile()
    if gfile.exists(join(folder, "generator.json")):
        log(f"ListOps: the generated set cached in {folder}.")
        return read_splits(folder), folder
    splits = generate(seed, **parameters)
    if write:
        gfile.makedirs(folder)
        for split in SPLITS:
            write_tsv(join(folder, file_name(split)), splits[split])
        storage.write_json(join(folder, "generator.json"),
                                 dict(parameters, seed=seed))
        log(f"ListOps: generated {sum(map(len, splits.values())):,} "
            f"examples (seed {seed}) into {folder}.")
    return splits, folder


# ------------------------------------------------------------- tokens


def tokens(source):
    """The tokens of an expression: split at spaces, parentheses dropped."""
    return [token for token in source.split() if token not in ("(", ")")]


def encode(source, where="ListOps expression"):
    """The token ids of an expression, `[CLS]` first (not cut).

    Raises:
        DataError: a token outside `VOCABULARY`, named with `where`.
    """
    ids = [CLS_ID]
    for token in tokens(source):
        index = _IDS.get(token)
        if index is None:
            raise DataError(
                f"{where}: unknown token {token!r}; expected one of "
                f"{', '.join(VOCABULARY[len(RESERVED):])} (and parentheses).")
        ids.append(index)
    return ids


_IDS = {token: index for index, token in enumerate(VOCABULARY)}


__all__ = ["CLS_ID", "DEFAULTS", "DIGITS", "END", "HEADER", "OPERATORS",
           "PAD_ID", "SPLITS", "VOCABULARY", "cache_folder", "cached_splits",
           "check_parameters", "encode", "file_name", "generate",
           "generate_tree", "read_splits", "read_tsv", "to_source", "tokens",
           "value", "write_tsv"]
