"""Light imports: what needs keras-hub is imported on first use.

`import keras_synth` (and `keras_synth.layers`) imports Keras and the
attention layer only. The keras-nlp blocks, `keras_synth.models` and
`keras_synth.samplers` subclass keras-hub classes, and keras-hub imports
TensorFlow, also on the JAX and PyTorch backends: they are imported the
first time one of them is used, all together (`load_all`), so that either
all of the package's keras-hub classes are registered with Keras or none.

Saved files still load after `import keras_synth` alone:

- `register_stubs` registers, under each deferred class's Keras name
  (`keras_synth>SynthesizerEncoder`, ..., and release 0.1.0's names that
  `keras_synth.models.legacy_names` keeps), a small stand-in whose
  `from_config` imports the real classes and builds the real object: Keras'
  loaders (`keras.saving.load_model`, `deserialize_keras_object`) look the
  name up in the registry and call `from_config`. The real class replaces
  the stand-in in the registry as soon as it is imported.
- keras-hub's generic loaders (`keras_hub.models.Backbone.from_preset`)
  compare the registered class with theirs (`issubclass`), which a
  stand-in cannot pass: `watch_keras_hub` imports the real classes right
  after keras-hub itself is imported, whoever imports it.

Without keras-hub installed, the stand-ins and the lazy attributes raise an
ImportError that says what to install.
"""

import contextlib
import importlib
import importlib.abc
import sys
import warnings

import keras

# The packages that import keras-hub, imported together by `load_all`.
HEAVY_PACKAGES = (
    "keras_synth.layers.blocks",
    "keras_synth.samplers",
    "keras_synth.models",
)
# Every name under which the heavy packages register a class with Keras,
# and that class (`module:Class`): the package's own names
# (`keras_synth>NAME`) and release 0.1.0's names of two recipe classes
# (`keras_synth.models.legacy_names`). A test checks that this table lists
# all of them.
_MODELS = "keras_synth.models."
DEFERRED = {
    "keras_synth>SynthesizerEncoder":
        "keras_synth.layers.blocks.encoder:SynthesizerEncoder",
    "keras_synth>SynthesizerDecoder":
        "keras_synth.layers.blocks.decoder:SynthesizerDecoder",
    "keras_synth>exact_gelu": "keras_synth.layers.blocks.base:exact_gelu",
    "keras_synth>LengthPenaltyBeamSampler":
        "keras_synth.samplers.length_penalty_beam_sampler:"
        "LengthPenaltyBeamSampler",
    "keras_synth>SmoothedSparseCategoricalCrossentropy":
        _MODELS + "losses:SmoothedSparseCategoricalCrossentropy",
    "keras_synth>InverseSqrtSchedule":
        _MODELS + "schedules:InverseSqrtSchedule",
    "keras_synth>CachedDecodingStep":
        _MODELS + "export_formats:CachedDecodingStep",
    "keras_synth>SynthesizerBackbone":
        _MODELS + "synthesizer_encoder.synthesizer_backbone:"
        "SynthesizerBackbone",
    "keras_synth>SynthesizerTextClassifier":
        _MODELS + "synthesizer_encoder.synthesizer_text_classifier:"
        "SynthesizerTextClassifier",
    "keras_synth>SynthesizerTextClassifierPreprocessor":
        _MODELS + "synthesizer_encoder."
        "synthesizer_text_classifier_preprocessor:"
        "SynthesizerTextClassifierPreprocessor",
    "keras_synth>SynthesizerMaskedLM":
        _MODELS + "synthesizer_encoder.synthesizer_masked_lm:"
        "SynthesizerMaskedLM",
    "keras_synth>SynthesizerMaskedLMPreprocessor":
        _MODELS + "synthesizer_encoder.synthesizer_masked_lm_preprocessor:"
        "SynthesizerMaskedLMPreprocessor",
    "keras_synth>SynthesizerCausalLMBackbone":
        _MODELS + "synthesizer_causal_lm.synthesizer_causal_lm_backbone:"
        "SynthesizerCausalLMBackbone",
    "keras_synth>SynthesizerCausalLM":
        _MODELS + "synthesizer_causal_lm.synthesizer_causal_lm:"
        "SynthesizerCausalLM",
    "keras_synth>SynthesizerCausalLMPreprocessor":
        _MODELS + "synthesizer_causal_lm.synthesizer_causal_lm_preprocessor:"
        "SynthesizerCausalLMPreprocessor",
    "keras_synth>SynthesizerSeq2SeqBackbone":
        _MODELS + "synthesizer_seq2seq.synthesizer_seq2seq_backbone:"
        "SynthesizerSeq2SeqBackbone",
    "keras_synth>SynthesizerSeq2SeqLM":
        _MODELS + "synthesizer_seq2seq.synthesizer_seq2seq_lm:"
        "SynthesizerSeq2SeqLM",
    "keras_synth>SynthesizerSeq2SeqLMPreprocessor":
        _MODELS + "synthesizer_seq2seq.synthesizer_seq2seq_lm_preprocessor:"
        "SynthesizerSeq2SeqLMPreprocessor",
    "keras_synth>SynthesizerSpanCorruptionPreprocessor":
        _MODELS + "synthesizer_seq2seq."
        "synthesizer_span_corruption_preprocessor:"
        "SynthesizerSpanCorruptionPreprocessor",
    "keras_synth>SynthesizerTokenizer":
        _MODELS + "tokenizers.synthesizer_tokenizer:SynthesizerTokenizer",
    "keras_synth>SynthesizerCharTokenizer":
        _MODELS + "tokenizers.synthesizer_char_tokenizer:"
        "SynthesizerCharTokenizer",
    "keras_synth>SynthesizerByteTokenizer":
        _MODELS + "tokenizers.byte_tokenizer:SynthesizerByteTokenizer",
    "recipes_lm>ByteTokenizer":
        _MODELS + "tokenizers.byte_tokenizer:SynthesizerByteTokenizer",
    "recipes.translate>InverseSqrtSchedule":
        _MODELS + "schedules:InverseSqrtSchedule",
}
INSTALL_HINT = 'pip install "keras-synth[nlp]"'

# Set while keras_synth itself imports keras-hub (`keras_synth._hub`), so
# that the keras-hub watch does not import the heavy packages in the middle
# of importing one of them.
_importing_keras_hub = [False]


def load_all():
    """Imports the heavy packages (all of them: see the module docstring).

    Raises:
        ImportError: keras-hub is not installed (the message says what to
            install).
    """
    try:
        for name in HEAVY_PACKAGES:
            importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name not in ("keras_hub", "keras_nlp"):
            raise
        raise ImportError(
            "keras_synth's keras-nlp blocks, models and samplers subclass "
            f"keras-hub classes and need keras-hub: {INSTALL_HINT}"
        ) from error


def lazy_attribute(module, name, targets):
    """A module's `__getattr__`: `targets` maps each lazy attribute name to
    `"package.module"` (a module) or `"package.module:attribute"`.

    Raises:
        AttributeError: `name` is not a lazy attribute of `module`.
        ImportError: keras-hub is missing.
    """
    if name not in targets:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    load_all()
    path, _, attribute = targets[name].partition(":")
    value = importlib.import_module(path)
    if attribute:
        value = getattr(value, attribute)
    setattr(sys.modules[module], name, value)
    return value


@contextlib.contextmanager
def importing_keras_hub():
    """The block in which keras_synth imports keras-hub itself."""
    saved = _importing_keras_hub[0]
    _importing_keras_hub[0] = True
    try:
        yield
    finally:
        _importing_keras_hub[0] = saved


def real_class(registered_name):
    """The deferred class registered as `registered_name` (imported)."""
    load_all()
    module, _, name = DEFERRED[registered_name].partition(":")
    return getattr(importlib.import_module(module), name)


def _make_stub(registered_name):
    def from_config(cls, config):
        return real_class(registered_name).from_config(config)

    def get_config(self):  # pragma: no cover - never instantiated
        raise TypeError(f"{registered_name} is a stand-in; use the real "
                        "class")

    target = DEFERRED[registered_name]
    return type(target.rpartition(":")[2], (), {
        "__doc__": f"Stand-in for `{target}` until it is imported: "
                   "`from_config` imports it and builds the real object.",
        "__module__": __name__,
        "from_config": classmethod(from_config),
        "get_config": get_config,
        "keras_synth_deferred": target,
    })


def register_stubs():
    """Registers a stand-in under each name of `DEFERRED` that has no class
    registered yet."""
    for registered_name in DEFERRED:
        if keras.saving.get_registered_object(registered_name) is None:
            package, _, name = registered_name.partition(">")
            keras.saving.register_keras_serializable(
                package=package, name=name)(_make_stub(registered_name))


def _keras_hub_imported():
    if _importing_keras_hub[0]:
        return  # keras_synth's own import: it imports the rest itself.
    try:
        load_all()
    except Exception as error:  # never break the user's `import keras_hub`
        warnings.warn(
            "keras_synth could not import its keras-hub classes after "
            f"keras-hub was imported ({type(error).__name__}: {error}); "
            "keras-hub's loaders will not find them. `import "
            "keras_synth.models` shows the error.",
            stacklevel=2,
        )


class _RunAfterExec(importlib.abc.Loader):
    """Wraps a module's loader: runs `_keras_hub_imported` after the module
    has been executed, then puts the original loader back."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        _unwatch()
        _keras_hub_imported()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _KerasHubWatch(importlib.abc.MetaPathFinder):
    """Finds `keras_hub` with the other finders and wraps its loader."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras_hub":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _RunAfterExec(spec.loader)
        return spec


def _unwatch():
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not isinstance(f, _KerasHubWatch)]


def watch_keras_hub():
    """Makes the heavy packages be imported right after keras-hub is (at
    once if it is already imported)."""
    if sys.modules.get("keras_hub") is not None:
        _keras_hub_imported()
    elif not any(isinstance(f, _KerasHubWatch) for f in sys.meta_path):
        sys.meta_path.insert(0, _KerasHubWatch())
