"""The synthesizers: one class per variant, each computing attention logits."""
