"""File formats: reading and writing psp model folders and the other libraries' static-embedding layouts.

- model_folder.py: reading a psp folder (config, safetensors weights, tokenizer) with numpy only, every file checked;
- folder_writer.py: writing one (`PSPEncoder.save_pretrained`), with smaller_tables.py (PCA, float16/int8 tables)
  and sentence_transformers_layout.py (the files that let `SentenceTransformer(folder)` load it);
- static_models.py: model2vec and sentence-transformers `StaticEmbedding` folders in and out (`psp_hf.load` reads
  them too).
"""

# What `PSPEncoder` reads a folder with; light (numpy, safetensors, tokenizers), so importing the package stays cheap.
from .model_folder import PSPSettings, read_settings, read_tokenizer, read_weights, resolve_model_path, word_boundary_id

__all__ = ["PSPSettings", "read_settings", "read_tokenizer", "read_weights", "resolve_model_path", "word_boundary_id"]
