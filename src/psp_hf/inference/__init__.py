"""The internals of `PSPEncoder.encode` (`psp_hf.encoder`): what turns sentences into embeddings.

- pooling.py (numpy mean/max of table rows, the twin of `psp_hf.modeling`'s), intra_op.py (torch pooling on the
  calling thread), piece_cache.py (the word -> pieces cache for plain-ASCII text), batches.py (batches over
  threads), piece_weights.py (SIF weights of the average), similarity.py (cosine, the one place it is computed);
- encoder_helpers.py (checks and tokenizer copies that need no encoder state) and encoder_types.py (the encoders
  that embed through the transformers model: LSTM, GRAN, projection, character units).

Users import `psp_hf.load` / `psp_hf.PSPEncoder`; how a model folder is read and written is in `psp_hf.persistence`.
"""
