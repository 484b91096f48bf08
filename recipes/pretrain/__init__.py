"""Pretraining recipe: `python -m recipes.pretrain --objective=mlm|span_corruption`.

Modules: `data` (the corpus: text files, the built-in corpus,
tensorflow_datasets; packing token streams into full windows; the
held-out split) is pure Python and NumPy; `objectives` (the masked LM on
`SynthesizerBackbone` and span corruption on `SynthesizerSeq2SeqBackbone`:
models, input pipelines, held-out scoring) and `train` (the command) use
TensorFlow.
"""
