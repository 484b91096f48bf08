"""`TracedPreprocessingMixin`: a task's preprocessing traced once."""

import json


class TracedPreprocessingMixin:
    """`fit`, `evaluate` and `predict` on raw strings trace the
    preprocessing once, not at every call.

    keras-hub's tasks map `preprocess_samples` over a new `tf.data`
    pipeline at each `fit`, `evaluate` or `predict` on in-memory data, and
    `Dataset.map` traces it anew each time: the tokenizer's and packer's
    graph, most of the time of a short `predict`. Here that preprocessing
    is one `tf.function` per task, traced once per input structure and
    reused by every later map: the same outputs, about half the time of a
    `predict` of a few sentences.

    The function is made again when the preprocessor is replaced or its
    config changes (e.g. a new `sequence_length`). Only preprocessors
    whose class says `draws_random = False` are traced once; those that
    draw random numbers (the masked LM's masks, span corruption's spans)
    and any other preprocessor are traced at every map as before: a reused
    function would go on with one random stream across calls.
    """

    def preprocess_samples(self, x, y=None, sample_weight=None):
        import tensorflow as tf

        preprocessor = self.preprocessor
        if (preprocessor is None or not tf.inside_function()
                or getattr(preprocessor, "draws_random", True)):
            return super().preprocess_samples(x, y, sample_weight)
        key = (id(preprocessor), json.dumps(
            preprocessor.get_config(), sort_keys=True, default=repr))
        cached = self.__dict__.get("_traced_preprocessing")
        if cached is None or cached[0] != key:
            # In `__dict__`, out of Keras's attribute tracking.
            cached = self.__dict__["_traced_preprocessing"] = (
                key, tf.function(super().preprocess_samples, autograph=False))
        return cached[1](x, y, sample_weight)
