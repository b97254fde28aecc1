"""The internals of `PSPEncoder.encode` (`psp_hf.encoder`): what turns sentences into embeddings.

- pooling.py (mean/max of table rows: the C kernel `_pooling.c`, else torch or numpy, twins of `psp_hf.modeling`'s),
  intra_op.py (torch pooling on the calling thread), piece_cache.py (the word -> pieces cache), batch_words.py (a
  batch's words looked up in it: the C kernel `_words.c`, else numpy), batches.py (batches over threads),
  piece_weights.py (SIF weights of the average), similarity.py (cosine, the one place it is computed);
- encoder_helpers.py (checks and tokenizer copies that need no encoder state) and encoder_types.py (the encoders
  that embed through the transformers model: LSTM, GRAN, projection, character units).

Users import `psp_hf.load` / `psp_hf.PSPEncoder`; how a model folder is read and written is in `psp_hf.persistence`.
"""
