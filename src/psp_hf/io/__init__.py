"""File input and output: sentence and pair files read with `FILE:LINE` errors, atomic writes (`files.py`), files
read a block of lines at a time (`lines.py`) and float32 `.npy` files written row by row (`npy.py`)."""
